/// Appends JSON text to a byte buffer without building an intermediate tree: records are written on the hot
/// path, once per notification.
struct JSONWriter {
    private(set) var bytes: [UInt8] = []
    private var needsComma: [Bool] = []

    init(reservingCapacity capacity: Int = 512) {
        self.bytes.reserveCapacity(capacity)
    }

    mutating func beginObject() {
        self.beginValue()
        self.bytes.append(UInt8(ascii: "{"))
        self.needsComma.append(false)
    }

    mutating func endObject() {
        self.needsComma.removeLast()
        self.bytes.append(UInt8(ascii: "}"))
    }

    /// Writes `"name":` so that the next value call fills it. Names are constants, so they need no escaping.
    mutating func key(_ name: StaticString) {
        if self.needsComma[self.needsComma.count - 1] { self.bytes.append(UInt8(ascii: ",")) }
        self.needsComma[self.needsComma.count - 1] = true
        self.bytes.append(UInt8(ascii: "\""))
        name.withUTF8Buffer { self.bytes.append(contentsOf: $0) }
        self.bytes.append(UInt8(ascii: "\""))
        self.bytes.append(UInt8(ascii: ":"))
        self.afterKey = true
    }

    /// Writes `"name":` for a name known only at run time (log metadata keys), escaped.
    mutating func key(escaping name: String) {
        if self.needsComma[self.needsComma.count - 1] { self.bytes.append(UInt8(ascii: ",")) }
        self.needsComma[self.needsComma.count - 1] = true
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
        self.bytes.append(contentsOf: String(value).utf8)
    }

    mutating func int<T: BinaryInteger>(_ value: T?) {
        if let value { self.int(value) } else { self.null() }
    }

    /// Writes a number with up to three decimals, the precision used for milliseconds.
    mutating func milliseconds(_ value: Double?) {
        guard let value, value.isFinite else {
            self.null()
            return
        }
        self.beginValue()
        let thousandths = Int64((value * 1000).rounded())
        let whole = thousandths / 1000
        let fraction = abs(thousandths % 1000)
        if thousandths < 0 && whole == 0 { self.bytes.append(UInt8(ascii: "-")) }
        self.bytes.append(contentsOf: String(whole).utf8)
        if fraction != 0 {
            self.bytes.append(UInt8(ascii: "."))
            var digits = String(fraction)
            while digits.count < 3 { digits = "0" + digits }
            while digits.hasSuffix("0") { digits.removeLast() }
            self.bytes.append(contentsOf: digits.utf8)
        }
    }

    mutating func null() {
        self.beginValue()
        self.bytes.append(contentsOf: "null".utf8)
    }

    private mutating func beginValue() {
        if self.afterKey {
            self.afterKey = false
            return
        }
        if let last = self.needsComma.last {
            if last { self.bytes.append(UInt8(ascii: ",")) }
            self.needsComma[self.needsComma.count - 1] = true
        }
    }

    /// Appends `value` as a JSON string literal: quotes, backslashes and control characters are escaped,
    /// everything else is copied as UTF-8.
    static func appendEscaped(_ value: String, to bytes: inout [UInt8]) {
        bytes.append(UInt8(ascii: "\""))
        for byte in value.utf8 {
            switch byte {
            case UInt8(ascii: "\""): bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "\"")])
            case UInt8(ascii: "\\"): bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "\\")])
            case 0x0A: bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "n")])
            case 0x0D: bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "r")])
            case 0x09: bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "t")])
            case 0..<0x20, 0x7F:
                let hex: [UInt8] = Array("0123456789abcdef".utf8)
                bytes.append(contentsOf: [
                    UInt8(ascii: "\\"), UInt8(ascii: "u"), UInt8(ascii: "0"), UInt8(ascii: "0"),
                    hex[Int(byte >> 4)], hex[Int(byte & 0x0F)],
                ])
            default: bytes.append(byte)
            }
        }
        bytes.append(UInt8(ascii: "\""))
    }
}

/// RFC 3339 timestamps in UTC with milliseconds (`2026-11-22T10:00:00.123Z`), computed without Foundation's
/// formatters, which are slow and not thread-safe to share.
enum Timestamp {
    /// Formats milliseconds since the UNIX epoch.
    static func rfc3339(epochMilliseconds: Int64) -> String {
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
        let hour = rest / 3_600_000
        let minute = rest / 60_000 % 60
        let second = rest / 1000 % 60
        let millisecond = rest % 1000
        return "\(pad(year, 4))-\(pad(month, 2))-\(pad(day, 2))T\(pad(hour, 2)):\(pad(minute, 2)):\(pad(second, 2))"
            + ".\(pad(millisecond, 3))Z"
    }

    private static func pad(_ value: Int64, _ width: Int) -> String {
        let text = String(value)
        return text.count >= width ? text : String(repeating: "0", count: width - text.count) + text
    }
}
