import APNSCore

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

extension JSONValue {
    /// How deep arrays and objects may nest; deeper input is rejected rather than risking the stack.
    package static let maximumDepth = 256

    /// Parses one JSON document (RFC 8259) from UTF-8 `bytes`, surrounding whitespace allowed.
    ///
    /// A number without fraction or exponent becomes ``integer(_:)`` when it fits in `Int64`, otherwise
    /// ``double(_:)`` (rounded to the nearest double, as JavaScript reads it). A number beyond the double
    /// range (magnitude over about 1.8e308) anywhere in the document is an error,
    /// ``JSONParseError/Code/numberOutOfRange``; one too small for a double reads as `0` (or `-0.0`). Strings
    /// must be valid UTF-8, and arrays and objects nest at most ``maximumDepth`` deep.
    ///
    /// The bytes are parsed into a ``JSONTape`` first and the tree is built from it, every array and object at
    /// exactly its size. Memory: the tree takes at most 28 bytes per input byte, malloc's overhead included
    /// (measured on the worst shapes: `[[0],[0],…]`, `[0,0,…]`, `[{},{},…]`, `[{"":0},…]`, long strings and
    /// keys; `JSONValueBoundsTests` checks 32), and while it is built the tape adds at most 16 more (see
    /// ``JSONDocument/init(parsing:projection:)``).
    package init(parsing bytes: some Collection<UInt8>) throws(JSONParseError) {
        let result = bytes.withContiguousStorageIfAvailable(Self.parse)
        self = try (result ?? Array(bytes).withUnsafeBufferPointer(Self.parse)).get()
    }

    /// Parses one JSON document from `text`.
    package init(parsing text: String) throws(JSONParseError) {
        var text = text
        self = try text.withUTF8(Self.parse).get()
    }

    private static func parse(_ buffer: UnsafeBufferPointer<UInt8>) -> Result<JSONValue, JSONParseError> {
        Result { () throws(JSONParseError) in
            let document = JSONDocument(taking: try JSONParser.parse(buffer, projection: .everything))
            return withExtendedLifetime(document) { document.tape.value(JSONTape.root) }
        }
    }
}

extension JSONDocument {
    /// Parses `bytes`, putting on the tape only what `projection` names; everything else is checked as strictly
    /// as by ``JSONValue/init(parsing:)-(some Collection<UInt8>)`` but left out, so the same bytes are rejected or
    /// accepted whatever the projection.
    ///
    /// Memory: a copy of the bytes (strings with escapes are decoded in it), and 16 bytes per node; a node takes
    /// at least two input bytes (`0,`) but the last, so the nodes take at most 8 bytes per input byte, 16 with the
    /// spare room of their growth by doubling. Values that are only checked take no node.
    convenience init(parsing bytes: [UInt8], projection: JSONProjection) throws(JSONParseError) {
        let parsed = try bytes.withUnsafeBufferPointer { buffer in
            Result { () throws(JSONParseError) in try JSONParser.parse(buffer, projection: projection) }
        }.get()
        self.init(taking: parsed)
    }
}

/// A recursive-descent parser straight over the input bytes into a ``JSONTape``: no intermediate tokens, and
/// strings are read where they are in a copy of the input (those with escapes decoded in place).
private struct JSONParser {
    private let bytes: UnsafeBufferPointer<UInt8>
    private var index = 0
    private var depth = 0
    /// The input's copy the tape's strings are in.
    private let copy: UnsafeMutableBufferPointer<UInt8>
    /// What to build.
    private let projection: JSONProjection
    /// The tape's nodes, `nodeCount` of them so far.
    private var nodes: UnsafeMutableBufferPointer<JSONTape.Node>
    private var nodeCount = 0

    /// A parser that owns a copy of `bytes` and room for nodes, which ``parse(_:projection:)`` hands to the
    /// document or frees.
    private init(_ bytes: UnsafeBufferPointer<UInt8>, projection: JSONProjection) {
        self.bytes = bytes
        self.projection = projection
        self.copy = UnsafeMutableBufferPointer.allocate(capacity: bytes.count)
        _ = self.copy.initialize(fromContentsOf: bytes)
        // Most events need a few dozen nodes (only what routes read is built); more grow by doubling.
        self.nodes = UnsafeMutableBufferPointer.allocate(capacity: min(32, bytes.count / 2 + 1))
    }

    /// The document `bytes` hold, with what `projection` names on its tape.
    static func parse(
        _ bytes: UnsafeBufferPointer<UInt8>, projection: JSONProjection
    ) throws(JSONParseError) -> JSONDocument.Parsed {
        guard bytes.count <= JSONTape.maximumBytes else {
            throw JSONParseError(code: .tooLarge, byteOffset: 0)
        }
        var parser = JSONParser(bytes, projection: projection)
        do throws(JSONParseError) {
            try parser.parseDocument()
        } catch {
            parser.copy.deallocate()
            parser.nodes.deallocate()
            guard error.code == .numberOutOfRange else { throw error }
            var located = error
            var locator = JSONParser(bytes, projection: .everything)
            located.path = locator.path(to: error.byteOffset) ?? []
            locator.copy.deallocate()
            locator.nodes.deallocate()
            throw located
        }
        return JSONDocument.Parsed(nodes: parser.nodes, count: parser.nodeCount, bytes: parser.copy)
    }

    private mutating func parseDocument() throws(JSONParseError) {
        self.skipWhitespace()
        try self.parseValue(self.projection.root)
        self.skipWhitespace()
        guard self.index == self.bytes.count else { throw self.error(.trailingBytes) }
    }

    private func error(_ code: JSONParseError.Code) -> JSONParseError {
        JSONParseError(code: code, byteOffset: self.index)
    }

    private mutating func skipWhitespace() {
        while self.index < self.bytes.count {
            switch self.bytes[self.index] {
            case 0x20, 0x0A, 0x0D, 0x09: self.index += 1
            default: return
            }
        }
    }

    /// Where a string's bytes are once it is checked: in the copy, from the byte after its opening quote, escapes
    /// decoded.
    private struct StringSpan {
        var start: Int
        var count: Int
    }

    /// The index the next node gets.
    private var nextNode: UInt32 { UInt32(truncatingIfNeeded: self.nodeCount) }

    private mutating func append(_ node: JSONTape.Node) {
        if self.nodeCount == self.nodes.count {
            let larger = UnsafeMutableBufferPointer<JSONTape.Node>.allocate(capacity: max(16, 2 * self.nodes.count))
            _ = larger.initialize(fromContentsOf: self.nodes)
            self.nodes.deallocate()
            self.nodes = larger
        }
        self.nodes.initializeElement(at: self.nodeCount, to: node)
        self.nodeCount += 1
    }

    private mutating func appendLeaf(_ kind: JSONTape.Kind) {
        self.append(JSONTape.Node(kind, end: self.nextNode + 1))
    }

    private mutating func appendString(_ span: StringSpan) {
        self.append(
            JSONTape.Node(
                .string, first: UInt32(truncatingIfNeeded: span.start), second: UInt32(truncatingIfNeeded: span.count),
                end: self.nextNode + 1))
    }

    /// The bytes of a string parsed (in the copy).
    private func text(of span: StringSpan) -> UnsafeBufferPointer<UInt8> {
        UnsafeBufferPointer(rebasing: self.copy[span.start..<span.start + span.count])
    }

    /// Parses the value at the current position; `projection` says what of it to put on the tape, `nil` nothing
    /// (the value is checked and skipped).
    private mutating func parseValue(_ projection: JSONProjection.Selection?) throws(JSONParseError) {
        guard self.index < self.bytes.count else { throw self.error(.unexpectedEnd) }
        let build = projection != nil
        switch self.bytes[self.index] {
        case UInt8(ascii: "{"): try self.parseObject(projection)
        case UInt8(ascii: "["): try self.parseArray(build: build)
        case UInt8(ascii: "\""):
            let span = try self.parseString()
            if build { self.appendString(span) }
        case UInt8(ascii: "t"):
            try self.expectLiteral("true")
            if build { self.appendLeaf(.true) }
        case UInt8(ascii: "f"):
            try self.expectLiteral("false")
            if build { self.appendLeaf(.false) }
        case UInt8(ascii: "n"):
            try self.expectLiteral("null")
            if build { self.appendLeaf(.null) }
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            try self.parseNumber(build: build)
        default:
            throw self.error(.unexpectedByte)
        }
    }

    private mutating func expectLiteral(_ literal: StaticString) throws(JSONParseError) {
        let count = literal.utf8CodeUnitCount
        guard self.bytes.count - self.index >= count else { throw self.error(.unexpectedEnd) }
        let start = literal.utf8Start
        for offset in 0..<count where self.bytes[self.index + offset] != start[offset] {
            self.index += offset
            throw self.error(.unexpectedByte)
        }
        self.index += count
    }

    private mutating func enter() throws(JSONParseError) {
        self.depth += 1
        guard self.depth <= JSONValue.maximumDepth else { throw self.error(.tooDeep) }
    }

    /// Opens a container's node when building; answers its index.
    private mutating func open(_ kind: JSONTape.Kind, build: Bool) -> Int {
        let node = self.nodeCount
        if build { self.append(JSONTape.Node(kind, end: 0)) }
        return node
    }

    /// Closes the container opened at `node` with `count` children.
    private mutating func close(_ node: Int, count: UInt32, build: Bool) {
        self.index += 1
        self.depth -= 1
        guard build else { return }
        self.nodes[node].second = count
        self.nodes[node].end = self.nextNode
    }

    private mutating func parseObject(_ projection: JSONProjection.Selection?) throws(JSONParseError) {
        try self.enter()
        self.index += 1
        let build = projection != nil
        let node = self.open(.object, build: build)
        var count: UInt32 = 0
        self.skipWhitespace()
        guard self.index < self.bytes.count else { throw self.error(.unexpectedEnd) }
        if self.bytes[self.index] == UInt8(ascii: "}") {
            self.close(node, count: 0, build: build)
            return
        }
        while true {
            self.skipWhitespace()
            guard self.index < self.bytes.count else { throw self.error(.unexpectedEnd) }
            guard self.bytes[self.index] == UInt8(ascii: "\"") else { throw self.error(.unexpectedByte) }
            let key = try self.parseString()
            let memberProjection = self.memberProjection(key, of: projection)
            self.skipWhitespace()
            guard self.index < self.bytes.count else { throw self.error(.unexpectedEnd) }
            guard self.bytes[self.index] == UInt8(ascii: ":") else { throw self.error(.unexpectedByte) }
            self.index += 1
            self.skipWhitespace()
            if memberProjection != nil {
                self.appendString(key)
                count += 1
            }
            try self.parseValue(memberProjection)
            self.skipWhitespace()
            guard self.index < self.bytes.count else { throw self.error(.unexpectedEnd) }
            switch self.bytes[self.index] {
            case UInt8(ascii: ","):
                self.index += 1
            case UInt8(ascii: "}"):
                self.close(node, count: count, build: build)
                return
            default:
                throw self.error(.unexpectedByte)
            }
        }
    }

    private mutating func parseArray(build: Bool) throws(JSONParseError) {
        try self.enter()
        self.index += 1
        let node = self.open(.array, build: build)
        var count: UInt32 = 0
        self.skipWhitespace()
        guard self.index < self.bytes.count else { throw self.error(.unexpectedEnd) }
        if self.bytes[self.index] == UInt8(ascii: "]") {
            self.close(node, count: 0, build: build)
            return
        }
        while true {
            self.skipWhitespace()
            try self.parseValue(build ? .everything : nil)
            count += 1
            self.skipWhitespace()
            guard self.index < self.bytes.count else { throw self.error(.unexpectedEnd) }
            switch self.bytes[self.index] {
            case UInt8(ascii: ","):
                self.index += 1
            case UInt8(ascii: "]"):
                self.close(node, count: count, build: build)
                return
            default:
                throw self.error(.unexpectedByte)
            }
        }
    }

    /// The path (member names and array indices) to the value that starts at byte `target`, in a document
    /// this parser accepted up to there; `nil` when no value starts there. Runs only to report where a number
    /// out of range is, so the parse itself carries no path.
    mutating func path(to target: Int) -> [String]? {
        self.skipWhitespace()
        return try? self.locate(target)
    }

    private mutating func locate(_ target: Int) throws(JSONParseError) -> [String]? {
        if self.index == target { return [] }
        guard self.index < self.bytes.count else { throw self.error(.unexpectedEnd) }
        let isObject = self.bytes[self.index] == UInt8(ascii: "{")
        guard isObject || self.bytes[self.index] == UInt8(ascii: "[") else {
            try self.parseValue(nil)
            return nil
        }
        self.index += 1
        var offset = 0
        while true {
            self.skipWhitespace()
            guard self.index < self.bytes.count else { throw self.error(.unexpectedEnd) }
            if self.bytes[self.index] == UInt8(ascii: isObject ? "}" : "]") {
                self.index += 1
                return nil
            }
            var segment = String(offset)
            if isObject {
                let key = try self.parseString()
                segment = String(decoding: self.text(of: key), as: UTF8.self)
                self.skipWhitespace()
                self.index += 1  // the colon
                self.skipWhitespace()
            }
            if let path = try self.locate(target) { return [segment] + path }
            offset += 1
            self.skipWhitespace()
            if self.index < self.bytes.count, self.bytes[self.index] == UInt8(ascii: ",") { self.index += 1 }
        }
    }

    /// What to build of the value of the member named `key` of an object built with `projection`; `nil` when
    /// the value is not needed. A projection that names members compares the name's bytes with them.
    private func memberProjection(
        _ key: StringSpan, of selection: JSONProjection.Selection?
    ) -> JSONProjection.Selection? {
        guard let selection else { return nil }
        return self.projection.member(of: selection, utf8: self.text(of: key))
    }

    /// Parses a string starting at its opening quote, checks it, and answers where its bytes (escapes decoded)
    /// are.
    private mutating func parseString() throws(JSONParseError) -> StringSpan {
        self.index += 1
        let start = self.index
        // Fast path: no escapes, so the bytes between the quotes are the string. The scan works on locals so
        // that it stays in registers; `highBits` collects bit 7 of every byte to spot non-ASCII text.
        var position = start
        var highBits: UInt8 = 0
        let count = self.bytes.count
        // Eight bytes at a time while none of them is a quote, a backslash or a control character (the usual
        // zero-byte test on the word XORed with the byte searched for); the byte loop below finds which one.
        if let base = self.bytes.baseAddress {
            let ones: UInt64 = 0x0101_0101_0101_0101
            let highs: UInt64 = 0x8080_8080_8080_8080
            var wordHighBits: UInt64 = 0
            while count - position >= 8 {
                let word = UnsafeRawPointer(base + position).loadUnaligned(as: UInt64.self)
                let quote = word ^ (ones &* UInt64(UInt8(ascii: "\"")))
                let backslash = word ^ (ones &* UInt64(UInt8(ascii: "\\")))
                let special =
                    ((quote &- ones) & ~quote) | ((backslash &- ones) & ~backslash) | ((word &- ones &* 0x20) & ~word)
                if special & highs != 0 { break }
                wordHighBits |= word
                position += 8
            }
            if wordHighBits & highs != 0 { highBits = 0x80 }
        }
        while position < count {
            let byte = self.bytes[position]
            if byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") || byte < 0x20 { break }
            highBits |= byte
            position += 1
        }
        self.index = position
        if position < count, self.bytes[position] == UInt8(ascii: "\"") {
            let slice = UnsafeBufferPointer(rebasing: self.bytes[start..<position])
            guard highBits < 0x80 || isValidUTF8(slice) else {
                throw JSONParseError(code: .invalidUTF8, byteOffset: start)
            }
            self.index += 1
            return StringSpan(start: start, count: position - start)
        }
        if position < count, self.bytes[position] < 0x20 { throw self.error(.invalidString) }
        guard self.index < self.bytes.count else { throw self.error(.unexpectedEnd) }
        // Slow path: decode escapes in place in the copy, behind the reading position (an escape is never shorter
        // than what it decodes to). The bytes before the first escape are already there.
        var written = self.index
        while self.index < self.bytes.count {
            let byte = self.bytes[self.index]
            switch byte {
            case UInt8(ascii: "\""):
                self.index += 1
                let span = StringSpan(start: start, count: written - start)
                guard isValidUTF8(self.text(of: span)) else {
                    throw JSONParseError(code: .invalidUTF8, byteOffset: start)
                }
                return span
            case UInt8(ascii: "\\"):
                self.index += 1
                try self.parseEscape(writingAt: &written)
            case 0..<0x20:
                throw self.error(.invalidString)
            default:
                self.copy[written] = byte
                written += 1
                self.index += 1
            }
        }
        throw self.error(.unexpectedEnd)
    }

    /// Decodes the escape after a backslash into the copy at `written`, and moves `written` past it.
    private mutating func parseEscape(writingAt written: inout Int) throws(JSONParseError) {
        guard self.index < self.bytes.count else { throw self.error(.unexpectedEnd) }
        let byte = self.bytes[self.index]
        self.index += 1
        let decoded: UInt8
        switch byte {
        case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): decoded = byte
        case UInt8(ascii: "b"): decoded = 0x08
        case UInt8(ascii: "f"): decoded = 0x0C
        case UInt8(ascii: "n"): decoded = 0x0A
        case UInt8(ascii: "r"): decoded = 0x0D
        case UInt8(ascii: "t"): decoded = 0x09
        case UInt8(ascii: "u"):
            var scalar = try self.parseHex4()
            if (0xD800..<0xDC00).contains(scalar) {
                // A high surrogate must be followed by an escaped low surrogate.
                guard self.bytes.count - self.index >= 6, self.bytes[self.index] == UInt8(ascii: "\\"),
                    self.bytes[self.index + 1] == UInt8(ascii: "u")
                else { throw self.error(.invalidString) }
                self.index += 2
                let low = try self.parseHex4()
                guard (0xDC00..<0xE000).contains(low) else { throw self.error(.invalidString) }
                scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
            } else if (0xDC00..<0xE000).contains(scalar) {
                throw self.error(.invalidString)
            }
            guard let unicode = Unicode.Scalar(scalar), let encoded = UTF8.encode(unicode) else {
                throw self.error(.invalidString)
            }
            // `\uXXXX` (6 bytes) decodes to at most 3, a surrogate pair (12) to 4.
            for unit in encoded {
                self.copy[written] = unit
                written += 1
            }
            return
        default:
            self.index -= 1
            throw self.error(.invalidString)
        }
        self.copy[written] = decoded
        written += 1
    }

    private mutating func parseHex4() throws(JSONParseError) -> UInt32 {
        guard self.bytes.count - self.index >= 4 else { throw self.error(.unexpectedEnd) }
        var value: UInt32 = 0
        for _ in 0..<4 {
            let byte = self.bytes[self.index]
            let digit: UInt8
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
            default: throw self.error(.invalidString)
            }
            value = value << 4 | UInt32(digit)
            self.index += 1
        }
        return value
    }

    /// Parses a number and, when `build`ing, puts it on the tape; otherwise only checks its grammar and range.
    ///
    /// Numbers beyond the double range are refused whether built or not, so that an event is accepted or
    /// refused the same way whatever the routes read of it.
    private mutating func parseNumber(build: Bool) throws(JSONParseError) {
        let start = self.index
        var negative = false
        if self.bytes[self.index] == UInt8(ascii: "-") {
            negative = true
            self.index += 1
        }
        guard self.index < self.bytes.count else { throw self.error(.unexpectedEnd) }
        let integerStart = self.index
        if self.bytes[self.index] == UInt8(ascii: "0") {
            self.index += 1
        } else {
            guard self.skipDigits() > 0 else { throw self.error(.invalidNumber) }
        }
        let integerDigits = self.index - integerStart
        var isInteger = true
        if self.index < self.bytes.count, self.bytes[self.index] == UInt8(ascii: ".") {
            isInteger = false
            self.index += 1
            guard self.skipDigits() > 0 else { throw self.error(.invalidNumber) }
        }
        var hasExponent = false
        if self.index < self.bytes.count, self.bytes[self.index] | 0x20 == UInt8(ascii: "e") {
            isInteger = false
            hasExponent = true
            self.index += 1
            if self.index < self.bytes.count,
                self.bytes[self.index] == UInt8(ascii: "+") || self.bytes[self.index] == UInt8(ascii: "-")
            {
                self.index += 1
            }
            guard self.skipDigits() > 0 else { throw self.error(.invalidNumber) }
        }
        guard build else {
            // Without an exponent, 308 digits before the point always fit; only the rare rest is looked at.
            if hasExponent || integerDigits > 308,
                !Self.isWithinDoubleRange(UnsafeBufferPointer(rebasing: self.bytes[start..<self.index]))
            {
                throw JSONParseError(code: .numberOutOfRange, byteOffset: start)
            }
            return
        }
        if isInteger {
            // Accumulate negatively so that Int64.min parses too.
            var value: Int64 = 0
            var overflow = false
            for position in integerStart..<self.index {
                let digit = Int64(self.bytes[position] - UInt8(ascii: "0"))
                let (times10, o1) = value.multipliedReportingOverflow(by: 10)
                let (next, o2) = times10.subtractingReportingOverflow(digit)
                if o1 || o2 {
                    overflow = true
                    break
                }
                value = next
            }
            if !overflow {
                if !negative {
                    if value == .min { overflow = true } else { return self.appendNumber(.integer, -value) }
                } else {
                    return self.appendNumber(.integer, value)
                }
            }
        }
        let text = String(decoding: UnsafeBufferPointer(rebasing: self.bytes[start..<self.index]), as: UTF8.self)
        guard let double = Double(text) else {
            throw JSONParseError(code: .invalidNumber, byteOffset: start)
        }
        guard double.isFinite else { throw JSONParseError(code: .numberOutOfRange, byteOffset: start) }
        self.appendNumber(.double, double.bitPattern)
    }

    private mutating func appendNumber(_ kind: JSONTape.Kind, _ value: Int64) {
        self.appendNumber(kind, UInt64(bitPattern: value))
    }

    private mutating func appendNumber(_ kind: JSONTape.Kind, _ bits: UInt64) {
        self.append(JSONTape.Node(kind, bits: bits, end: self.nextNode + 1))
    }

    /// Whether the JSON number `text` (grammar already checked) is within the double range, without
    /// converting it when its decimal exponent settles the question.
    ///
    /// With `E` the power of ten of its first non-zero digit plus its exponent, the number is in
    /// [10^E, 10^(E+1)): below 10^308 it fits and from 10^309 it does not, whatever the digits; only
    /// `E == 308` needs the conversion. Zero fits whatever its exponent. The exponent's digits are read with
    /// saturation, so `1e99999999999999999999` cannot overflow the arithmetic.
    private static func isWithinDoubleRange(_ text: UnsafeBufferPointer<UInt8>) -> Bool {
        var position = text.first == UInt8(ascii: "-") ? 1 : 0
        // JSON writes no leading zeros, so an integer part other than `0` starts with its first non-zero digit.
        var integerDigits = 0
        while position < text.count, text[position] >= UInt8(ascii: "0"), text[position] <= UInt8(ascii: "9") {
            integerDigits += 1
            position += 1
        }
        let integerIsZero = integerDigits == 1 && text[position - 1] == UInt8(ascii: "0")
        var fractionZeros = 0
        var fractionIsZero = true
        if position < text.count, text[position] == UInt8(ascii: ".") {
            position += 1
            while position < text.count, text[position] >= UInt8(ascii: "0"), text[position] <= UInt8(ascii: "9") {
                if fractionIsZero {
                    if text[position] == UInt8(ascii: "0") { fractionZeros += 1 } else { fractionIsZero = false }
                }
                position += 1
            }
        }
        let power: Int
        if !integerIsZero {
            power = integerDigits - 1
        } else if !fractionIsZero {
            power = -(fractionZeros + 1)
        } else {
            return true  // zero, whatever the exponent
        }
        var exponent = 0
        if position < text.count {
            position += 1
            var sign = 1
            if text[position] == UInt8(ascii: "-") || text[position] == UInt8(ascii: "+") {
                if text[position] == UInt8(ascii: "-") { sign = -1 }
                position += 1
            }
            while position < text.count {
                exponent = min(exponent * 10 + Int(text[position] - UInt8(ascii: "0")), 1_000_000_000)
                position += 1
            }
            exponent *= sign
        }
        let decimalPower = power + exponent
        if decimalPower < 308 { return true }
        if decimalPower > 308 { return false }
        return Double(String(decoding: text, as: UTF8.self))?.isFinite ?? false
    }

    /// Skips ASCII digits and answers how many there were.
    private mutating func skipDigits() -> Int {
        let start = self.index
        while self.index < self.bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(self.bytes[self.index]) {
            self.index += 1
        }
        return self.index - start
    }
}

/// Whether `bytes` are well-formed UTF-8 (RFC 3629: shortest forms only, no surrogates, at most U+10FFFF).
///
/// Hand-written because the standard library's validating initialiser goes through generic code that costs
/// more than the whole rest of string parsing.
private func isValidUTF8(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
    var index = 0
    let count = bytes.count
    while index < count {
        let lead = bytes[index]
        if lead < 0x80 {
            index += 1
            continue
        }
        let length: Int
        var lower: UInt8 = 0x80
        var upper: UInt8 = 0xBF
        switch lead {
        case 0xC2...0xDF: length = 2
        case 0xE0:
            length = 3
            lower = 0xA0
        case 0xE1...0xEC, 0xEE...0xEF: length = 3
        case 0xED:
            length = 3
            upper = 0x9F
        case 0xF0:
            length = 4
            lower = 0x90
        case 0xF1...0xF3: length = 4
        case 0xF4:
            length = 4
            upper = 0x8F
        default: return false
        }
        guard count - index >= length else { return false }
        let second = bytes[index + 1]
        guard second >= lower, second <= upper else { return false }
        for offset in 2..<length where bytes[index + offset] & 0xC0 != 0x80 {
            return false
        }
        index += length
    }
    return true
}
