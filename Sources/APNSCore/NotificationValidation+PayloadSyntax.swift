/// The question every payload is asked, "is this one JSON object?", answered by reading its bytes once.
///
/// `JSONSerialization` answers it by building Foundation objects for the whole document, which costs several
/// microseconds per notification (the APNs simulator's profile, docs/benchmarks.md). This scanner builds
/// nothing and allocates nothing. It accepts a strict subset of what `JSONSerialization` accepts, so a `true`
/// needs no second opinion, and `false` means only "not plainly an object": the caller then asks
/// `JSONSerialization`, and the two together answer exactly as `JSONSerialization` alone.
///
/// The subset: RFC 8259 grammar in UTF-8 (no byte-order mark, no trailing comma, which `JSONSerialization`
/// tolerates), containers nested at most ``maximumDepth`` deep (it refuses 512), numbers of at most
/// ``maximumNumberDigits`` digits with at most two exponent digits (it refuses `1e309`), and no escaped UTF-16
/// surrogate (it refuses a lone one). Payloads outside the subset are rare and only slower.
enum PayloadSyntax {
    /// Deeper nesting is left to `JSONSerialization`; 64 levels also fit the scanner's one-word stack.
    static let maximumDepth = 64
    /// Longer numbers are left to `JSONSerialization`, which refuses some it cannot represent.
    static let maximumNumberDigits = 18

    /// Whether `bytes` is one JSON object, optionally surrounded by whitespace, inside the subset above.
    static func isPlainObject(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        var scanner = Scanner(bytes: bytes)
        return scanner.object()
    }

    private struct Scanner {
        let bytes: UnsafeBufferPointer<UInt8>
        var position = 0

        init(bytes: UnsafeBufferPointer<UInt8>) {
            self.bytes = bytes
        }

        private var next: UInt8? { self.position < self.bytes.count ? self.bytes[self.position] : nil }

        private mutating func skipWhitespace() {
            while let byte = self.next,
                byte == UInt8(ascii: " ") || byte == UInt8(ascii: "\n") || byte == UInt8(ascii: "\r")
                    || byte == UInt8(ascii: "\t")
            {
                self.position += 1
            }
        }

        private mutating func take(_ byte: UInt8) -> Bool {
            guard self.next == byte else { return false }
            self.position += 1
            return true
        }

        /// The document: `{`, then members and elements with an explicit stack (bit `n` of `objects` set when
        /// the container at depth `n + 1` is an object), so nesting costs no recursion.
        mutating func object() -> Bool {
            self.skipWhitespace()
            guard self.take(UInt8(ascii: "{")) else { return false }
            var depth = 1
            var objects: UInt64 = 1
            var justOpened = true
            while true {
                let inObject = objects >> UInt64(depth - 1) & 1 == 1
                self.skipWhitespace()
                if justOpened && self.take(inObject ? UInt8(ascii: "}") : UInt8(ascii: "]")) {
                    depth -= 1
                } else {
                    if inObject {
                        guard self.string() else { return false }
                        self.skipWhitespace()
                        guard self.take(UInt8(ascii: ":")) else { return false }
                        self.skipWhitespace()
                    }
                    guard let first = self.next else { return false }
                    if first == UInt8(ascii: "{") || first == UInt8(ascii: "[") {
                        guard depth < PayloadSyntax.maximumDepth else { return false }
                        self.position += 1
                        let bit = UInt64(1) << UInt64(depth)
                        objects = first == UInt8(ascii: "{") ? objects | bit : objects & ~bit
                        depth += 1
                        justOpened = true
                        continue
                    }
                    guard self.scalar(startingWith: first) else { return false }
                }
                // A value is complete: a separator, or closers until one.
                while true {
                    self.skipWhitespace()
                    if depth == 0 { return self.position == self.bytes.count }
                    if self.take(UInt8(ascii: ",")) {
                        justOpened = false
                        break
                    }
                    let closer = objects >> UInt64(depth - 1) & 1 == 1 ? UInt8(ascii: "}") : UInt8(ascii: "]")
                    guard self.take(closer) else { return false }
                    depth -= 1
                }
            }
        }

        private mutating func scalar(startingWith first: UInt8) -> Bool {
            switch first {
            case UInt8(ascii: "\""): return self.string()
            case UInt8(ascii: "t"): return self.literal("true")
            case UInt8(ascii: "f"): return self.literal("false")
            case UInt8(ascii: "n"): return self.literal("null")
            default: return self.number()
            }
        }

        private mutating func literal(_ word: StaticString) -> Bool {
            let count = word.utf8CodeUnitCount
            guard self.bytes.count - self.position >= count else { return false }
            for offset in 0..<count where self.bytes[self.position + offset] != word.utf8Start[offset] {
                return false
            }
            self.position += count
            return true
        }

        /// `-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]{1,2})?` with at most 18 digits before the exponent.
        private mutating func number() -> Bool {
            _ = self.take(UInt8(ascii: "-"))
            var digits = self.digits()
            guard digits > 0, digits == 1 || self.bytes[self.position - digits] != UInt8(ascii: "0") else {
                return false
            }
            if self.take(UInt8(ascii: ".")) {
                let fraction = self.digits()
                guard fraction > 0 else { return false }
                digits += fraction
            }
            if self.take(UInt8(ascii: "e")) || self.take(UInt8(ascii: "E")) {
                if !self.take(UInt8(ascii: "+")) { _ = self.take(UInt8(ascii: "-")) }
                guard (1...2).contains(self.digits()) else { return false }
            }
            return digits <= PayloadSyntax.maximumNumberDigits
        }

        private mutating func digits() -> Int {
            let start = self.position
            while let byte = self.next, byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") { self.position += 1 }
            return self.position - start
        }

        /// A string: no raw control character, the eight short escapes or `\uXXXX` outside the surrogates,
        /// and well-formed UTF-8.
        private mutating func string() -> Bool {
            guard self.take(UInt8(ascii: "\"")) else { return false }
            while let byte = self.next {
                switch byte {
                case UInt8(ascii: "\""):
                    self.position += 1
                    return true
                case UInt8(ascii: "\\"):
                    guard self.escape() else { return false }
                case 0..<0x20:
                    return false
                case 0x20..<0x80:
                    self.position += 1
                default:
                    guard self.utf8Sequence(startingWith: byte) else { return false }
                }
            }
            return false
        }

        private mutating func escape() -> Bool {
            self.position += 1
            guard let kind = self.next else { return false }
            self.position += 1
            switch kind {
            case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"), UInt8(ascii: "b"), UInt8(ascii: "f"),
                UInt8(ascii: "n"), UInt8(ascii: "r"), UInt8(ascii: "t"):
                return true
            case UInt8(ascii: "u"):
                guard self.bytes.count - self.position >= 4 else { return false }
                var value: UInt32 = 0
                for _ in 0..<4 {
                    guard let digit = Self.hexValue(self.bytes[self.position]) else { return false }
                    value = value << 4 | digit
                    self.position += 1
                }
                return !(0xD800...0xDFFF).contains(value)
            default:
                return false
            }
        }

        /// One multi-byte UTF-8 sequence (Unicode Table 3-7): no overlong form, no surrogate, nothing past
        /// U+10FFFF.
        private mutating func utf8Sequence(startingWith lead: UInt8) -> Bool {
            let continuations: Int
            var secondRange: ClosedRange<UInt8> = 0x80...0xBF
            switch lead {
            case 0xC2...0xDF: continuations = 1
            case 0xE0: (continuations, secondRange) = (2, 0xA0...0xBF)
            case 0xE1...0xEC, 0xEE...0xEF: continuations = 2
            case 0xED: (continuations, secondRange) = (2, 0x80...0x9F)
            case 0xF0: (continuations, secondRange) = (3, 0x90...0xBF)
            case 0xF1...0xF3: continuations = 3
            case 0xF4: (continuations, secondRange) = (3, 0x80...0x8F)
            default: return false
            }
            guard self.bytes.count - self.position > continuations,
                secondRange.contains(self.bytes[self.position + 1])
            else { return false }
            for offset in stride(from: 2, through: continuations, by: 1)
            where self.bytes[self.position + offset] & 0xC0 != 0x80 {
                return false
            }
            self.position += continuations + 1
            return true
        }

        private static func hexValue(_ byte: UInt8) -> UInt32? {
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): return UInt32(byte - UInt8(ascii: "0"))
            case UInt8(ascii: "a")...UInt8(ascii: "f"): return UInt32(byte - UInt8(ascii: "a") + 10)
            case UInt8(ascii: "A")...UInt8(ascii: "F"): return UInt32(byte - UInt8(ascii: "A") + 10)
            default: return nil
            }
        }
    }
}
