/// Appends JSON text to a byte buffer without building an intermediate tree: records are written on the hot
/// path, once per notification.
struct JSONWriter {
    private(set) var bytes: [UInt8] = []
    /// One bit per open container, innermost lowest: set once the container holds a member, so the next one
    /// needs a comma. Records nest three deep at most; deeper nesting than 64 is a programming error.
    private var commaBits: UInt64 = 0
    private var depth = 0

    init(reservingCapacity capacity: Int = 512) {
        self.bytes.reserveCapacity(capacity)
    }

    mutating func beginObject() {
        self.beginValue()
        self.bytes.append(UInt8(ascii: "{"))
        precondition(self.depth < 64, "JSONWriter nests at most 64 containers")
        self.commaBits <<= 1
        self.depth += 1
    }

    mutating func endObject() {
        self.commaBits >>= 1
        self.depth -= 1
        self.bytes.append(UInt8(ascii: "}"))
    }

    /// Writes `"name":` so that the next value call fills it. Names are constants, so they need no escaping.
    mutating func key(_ name: StaticString) {
        self.comma()
        self.bytes.append(UInt8(ascii: "\""))
        name.withUTF8Buffer { self.bytes.append(contentsOf: $0) }
        self.bytes.append(UInt8(ascii: "\""))
        self.bytes.append(UInt8(ascii: ":"))
        self.afterKey = true
    }

    /// Writes `"name":` for a name known only at run time (log metadata keys), escaped.
    mutating func key(escaping name: String) {
        self.comma()
        JSONWriter.appendEscaped(name, to: &self.bytes)
        self.bytes.append(UInt8(ascii: ":"))
        self.afterKey = true
    }

    /// Whether the last thing written was a key, so the next value needs no comma.
    private var afterKey = false

    mutating func string(_ value: String) {
        self.beginValue()
        JSONWriter.appendEscaped(value, to: &self.bytes)
    }

    mutating func string(_ value: String?) {
        if let value { self.string(value) } else { self.null() }
    }

    mutating func int<T: BinaryInteger>(_ value: T) {
        self.beginValue()
        JSONWriter.appendDecimal(Int64(clamping: value), to: &self.bytes)
    }

    mutating func int<T: BinaryInteger>(_ value: T?) {
        if let value { self.int(value) } else { self.null() }
    }

    /// Writes an RFC 3339 timestamp string (see ``Timestamp``) without making a `String` first.
    mutating func timestamp(epochMilliseconds: Int64?) {
        guard let epochMilliseconds else { return self.null() }
        self.beginValue()
        self.bytes.append(UInt8(ascii: "\""))
        Timestamp.append(epochMilliseconds: epochMilliseconds, to: &self.bytes)
        self.bytes.append(UInt8(ascii: "\""))
    }

    /// Writes a number with up to three decimals, the precision used for milliseconds.
    mutating func milliseconds(_ value: Double?) {
        guard let value, value.isFinite, abs(value) < 9e15 else {
            self.null()
            return
        }
        self.beginValue()
        let thousandths = Int64((value * 1000).rounded())
        let whole = thousandths / 1000
        var fraction = abs(thousandths % 1000)
        if thousandths < 0 && whole == 0 { self.bytes.append(UInt8(ascii: "-")) }
        JSONWriter.appendDecimal(whole, to: &self.bytes)
        guard fraction != 0 else { return }
        self.bytes.append(UInt8(ascii: "."))
        var digits = 3
        while fraction % 10 == 0 {
            fraction /= 10
            digits -= 1
        }
        JSONWriter.appendDigits(fraction, width: digits, to: &self.bytes)
    }

    mutating func null() {
        self.beginValue()
        self.bytes.append(contentsOf: "null".utf8)
    }

    private mutating func comma() {
        if self.commaBits & 1 != 0 { self.bytes.append(UInt8(ascii: ",")) }
        self.commaBits |= 1
    }

    private mutating func beginValue() {
        if self.afterKey {
            self.afterKey = false
            return
        }
        if self.depth > 0 { self.comma() }
    }

    /// Appends `value` in decimal.
    static func appendDecimal(_ value: Int64, to bytes: inout [UInt8]) {
        if value < 0 { bytes.append(UInt8(ascii: "-")) }
        let magnitude = value.magnitude
        var digits = 1
        var scale: UInt64 = 10
        while digits < 20, magnitude >= scale {
            digits += 1
            scale = scale &* 10
        }
        Self.appendDigits(magnitude, width: digits, to: &bytes)
    }

    /// Appends the lowest `width` (at most 20) decimal digits of `value`, zero-padded.
    static func appendDigits<T: BinaryInteger>(_ value: T, width: Int, to bytes: inout [UInt8]) {
        let value = UInt64(truncatingIfNeeded: value)
        // Digits are written from the right into a fixed buffer, then appended in one go.
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 20) { buffer in
            var rest = value
            var index = width
            while index > 0 {
                index -= 1
                buffer[index] = UInt8(ascii: "0") &+ UInt8(truncatingIfNeeded: rest % 10)
                rest /= 10
            }
            bytes.append(contentsOf: UnsafeBufferPointer(rebasing: buffer[0..<width]))
        }
    }

    /// Appends `value` as a JSON string literal: quotes, backslashes and control characters are escaped,
    /// everything else is copied as UTF-8.
    static func appendEscaped(_ value: String, to bytes: inout [UInt8]) {
        bytes.append(UInt8(ascii: "\""))
        var value = value
        value.withUTF8 { utf8 in
            // Runs of bytes that need no escaping are copied at once: most values have no escape at all.
            var runStart = 0
            for index in utf8.indices {
                let byte = utf8[index]
                guard byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") || byte == 0x7F
                else { continue }
                bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[runStart..<index]))
                runStart = index + 1
                switch byte {
                case UInt8(ascii: "\""): bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "\"")])
                case UInt8(ascii: "\\"): bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "\\")])
                case 0x0A: bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "n")])
                case 0x0D: bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "r")])
                case 0x09: bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "t")])
                default:
                    let hex: [UInt8] = Array("0123456789abcdef".utf8)
                    bytes.append(contentsOf: [
                        UInt8(ascii: "\\"), UInt8(ascii: "u"), UInt8(ascii: "0"), UInt8(ascii: "0"),
                        hex[Int(byte >> 4)], hex[Int(byte & 0x0F)],
                    ])
                }
            }
            bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[runStart...]))
        }
        bytes.append(UInt8(ascii: "\""))
    }
}

/// RFC 3339 timestamps in UTC with milliseconds (`2026-11-22T10:00:00.123Z`), computed without Foundation's
/// formatters, which are slow and not thread-safe to share.
enum Timestamp {
    /// Formats milliseconds since the UNIX epoch.
    static func rfc3339(epochMilliseconds: Int64) -> String {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(24)
        Self.append(epochMilliseconds: epochMilliseconds, to: &bytes)
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Appends the timestamp's UTF-8 to `bytes`. A year outside 0...9999 (RFC 3339 has none) is written in
    /// full, with its sign: records never carry one, since the APNs client drops timestamps outside those years.
    static func append(epochMilliseconds: Int64, to bytes: inout [UInt8]) {
        let millisecondsPerDay: Int64 = 86_400_000
        var days = epochMilliseconds / millisecondsPerDay
        var rest = epochMilliseconds % millisecondsPerDay
        if rest < 0 {
            rest += millisecondsPerDay
            days -= 1
        }
        // Howard Hinnant's civil-from-days algorithm.
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36524 - dayOfEra / 146_096) / 365
        var year = yearOfEra + era * 400
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let shiftedMonth = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * shiftedMonth + 2) / 5 + 1
        let month = shiftedMonth < 10 ? shiftedMonth + 3 : shiftedMonth - 9
        if month <= 2 { year += 1 }
        if (0...9999).contains(year) {
            JSONWriter.appendDigits(year, width: 4, to: &bytes)
        } else {
            JSONWriter.appendDecimal(year, to: &bytes)
        }
        bytes.append(UInt8(ascii: "-"))
        JSONWriter.appendDigits(month, width: 2, to: &bytes)
        bytes.append(UInt8(ascii: "-"))
        JSONWriter.appendDigits(day, width: 2, to: &bytes)
        bytes.append(UInt8(ascii: "T"))
        JSONWriter.appendDigits(rest / 3_600_000, width: 2, to: &bytes)
        bytes.append(UInt8(ascii: ":"))
        JSONWriter.appendDigits(rest / 60_000 % 60, width: 2, to: &bytes)
        bytes.append(UInt8(ascii: ":"))
        JSONWriter.appendDigits(rest / 1000 % 60, width: 2, to: &bytes)
        bytes.append(UInt8(ascii: "."))
        JSONWriter.appendDigits(rest % 1000, width: 3, to: &bytes)
        bytes.append(UInt8(ascii: "Z"))
    }
}
