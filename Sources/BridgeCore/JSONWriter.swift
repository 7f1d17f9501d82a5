import APNSCore

/// Appends JSON text to a byte buffer without building an intermediate tree: records are written on the hot
/// path, once per notification. Not copyable: it owns its buffer (a ``ByteBuilder``).
package struct JSONWriter: ~Copyable {
    private var output: ByteBuilder
    /// What was written.
    package var bytes: [UInt8] { self.output.bytes }
    /// One bit per open container, innermost lowest: set once the container holds a member, so the next one
    /// needs a comma. Records nest three deep at most; deeper nesting than 64 is a programming error.
    private var commaBits: UInt64 = 0
    private var depth = 0

    package init(reservingCapacity capacity: Int = 512) {
        self.output = ByteBuilder(capacity: capacity)
    }

    deinit {
        self.output.deallocate()
    }

    package mutating func beginObject() {
        self.beginValue()
        self.output.append(UInt8(ascii: "{"))
        precondition(self.depth < 64, "JSONWriter nests at most 64 containers")
        self.commaBits <<= 1
        self.depth += 1
    }

    package mutating func endObject() {
        self.commaBits >>= 1
        self.depth -= 1
        self.output.append(UInt8(ascii: "}"))
    }

    /// Writes `"name":` so that the next value call fills it. Names are constants, so they need no escaping.
    @inline(__always)
    package mutating func key(_ name: StaticString) {
        self.comma()
        self.output.append(UInt8(ascii: "\""))
        self.output.append(ascii: name)
        self.output.append(UInt8(ascii: "\""))
        self.output.append(UInt8(ascii: ":"))
        self.afterKey = true
    }

    /// Writes `"name":` for a name known only at run time (log metadata keys), escaped.
    package mutating func key(escaping name: String) {
        self.comma()
        JSONText.appendQuoted(name, to: &self.output)
        self.output.append(UInt8(ascii: ":"))
        self.afterKey = true
    }

    /// Whether the last thing written was a key, so the next value needs no comma.
    private var afterKey = false

    package mutating func string(_ value: String) {
        self.beginValue()
        JSONText.appendQuoted(value, to: &self.output)
    }

    /// Writes a string value from bytes that are valid UTF-8 already.
    package mutating func string(utf8 value: [UInt8]) {
        self.beginValue()
        value.withUnsafeBufferPointer { JSONText.appendQuoted(utf8: $0, to: &self.output) }
    }

    package mutating func string(_ value: String?) {
        if let value { self.string(value) } else { self.null() }
    }

    package mutating func int<T: BinaryInteger>(_ value: T) {
        self.beginValue()
        JSONText.appendDecimal(Int64(clamping: value), to: &self.output)
    }

    package mutating func int<T: BinaryInteger>(_ value: T?) {
        if let value { self.int(value) } else { self.null() }
    }

    /// Writes an RFC 3339 timestamp string (``JSONText/timestamp(epochMilliseconds:)``) without making a `String` first.
    package mutating func timestamp(epochMilliseconds: Int64?) {
        guard let epochMilliseconds else { return self.null() }
        self.beginValue()
        self.output.append(UInt8(ascii: "\""))
        JSONText.appendTimestamp(epochMilliseconds: epochMilliseconds, to: &self.output)
        self.output.append(UInt8(ascii: "\""))
    }

    /// Writes a number with up to three decimals, the precision used for milliseconds.
    package mutating func milliseconds(_ value: Double?) {
        guard let value, value.isFinite, abs(value) < 9e15 else {
            self.null()
            return
        }
        self.beginValue()
        let thousandths = Int64((value * 1000).rounded())
        let whole = thousandths / 1000
        var fraction = abs(thousandths % 1000)
        if thousandths < 0 && whole == 0 { self.output.append(UInt8(ascii: "-")) }
        JSONText.appendDecimal(whole, to: &self.output)
        guard fraction != 0 else { return }
        self.output.append(UInt8(ascii: "."))
        var digits = 3
        while fraction % 10 == 0 {
            fraction /= 10
            digits -= 1
        }
        JSONText.appendDigits(fraction, width: digits, to: &self.output)
    }

    /// Writes a value that is JSON text already (a route's rendered context), as it is.
    package mutating func json(_ value: [UInt8]) {
        self.beginValue()
        self.output.append(contentsOf: value)
    }

    package mutating func null() {
        self.beginValue()
        self.output.append(ascii: "null")
    }

    @inline(__always)
    private mutating func comma() {
        if self.commaBits & 1 != 0 { self.output.append(UInt8(ascii: ",")) }
        self.commaBits |= 1
    }

    @inline(__always)
    private mutating func beginValue() {
        if self.afterKey {
            self.afterKey = false
            return
        }
        if self.depth > 0 { self.comma() }
    }
}
