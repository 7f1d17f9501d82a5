/// JSON text written straight into bytes, with no intermediate tree or `String`: the one escaper, number and
/// timestamp writer shared by the mapper (payloads), the records (outcomes, invalid tokens, logs) and the provider
/// token (its header and claims).
///
/// Its writers are `public` and `@inlinable`, so that they are specialised for the output where they are called (an
/// array, a ``ByteBuilder``): this toolchain does not inline a `package` declaration's body into another module,
/// whatever its attributes, and the generic versions went through a witness table per byte.
public enum JSONText {
    /// Appends `text` with JSON string escaping, without the surrounding quotes.
    ///
    /// `"` and `\` are escaped, control characters (U+0000–U+001F) become `\n`, `\r`, `\t`, `\b`, `\f` or
    /// `\u00XX`, DEL (U+007F) `\u007f` (valid JSON either way; escaped so no record carries a raw control
    /// byte), and everything else, non-ASCII included, is kept as UTF-8.
    @inlinable
    public static func appendEscaped<Output: ByteOutput>(_ text: String, to bytes: inout Output) {
        text.withUTF8InPlace { Self.appendEscaped(utf8: $0, to: &bytes) }
    }

    /// ``appendEscaped(_:to:)`` for UTF-8 bytes.
    @inlinable
    public static func appendEscaped<Output: ByteOutput>(
        utf8: UnsafeBufferPointer<UInt8>, to bytes: inout Output
    ) {
        // Most values need no escape at all: find that out without an early exit (so that the compiler can check
        // many bytes at once) and copy them in one go.
        var needsEscape: UInt8 = 0
        for byte in utf8 {
            let control: UInt8 = byte < 0x20 || byte == 0x7F ? 1 : 0
            let quoteOrBackslash: UInt8 = byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") ? 1 : 0
            needsEscape |= control | quoteOrBackslash
        }
        if needsEscape == 0 {
            bytes.append(utf8: utf8)
            return
        }
        // Runs of bytes that need no escaping are copied at once.
        var runStart = 0
        for index in 0..<utf8.count {
            let byte = utf8[index]
            guard byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") || byte == 0x7F else {
                continue
            }
            if runStart < index {
                bytes.append(utf8: UnsafeBufferPointer(rebasing: utf8[runStart..<index]))
            }
            runStart = index + 1
            bytes.append(UInt8(ascii: "\\"))
            switch byte {
            case UInt8(ascii: "\""): bytes.append(UInt8(ascii: "\""))
            case UInt8(ascii: "\\"): bytes.append(UInt8(ascii: "\\"))
            case 0x0A: bytes.append(UInt8(ascii: "n"))
            case 0x0D: bytes.append(UInt8(ascii: "r"))
            case 0x09: bytes.append(UInt8(ascii: "t"))
            case 0x08: bytes.append(UInt8(ascii: "b"))
            case 0x0C: bytes.append(UInt8(ascii: "f"))
            default:
                bytes.append(UInt8(ascii: "u"))
                bytes.append(UInt8(ascii: "0"))
                bytes.append(UInt8(ascii: "0"))
                bytes.append(Self.hexDigit(byte >> 4))
                bytes.append(Self.hexDigit(byte & 0x0F))
            }
        }
        if runStart < utf8.count {
            bytes.append(utf8: UnsafeBufferPointer(rebasing: utf8[runStart..<utf8.count]))
        }
    }

    /// Appends `text` as a JSON string literal: quotes around ``appendEscaped(_:to:)``.
    @inlinable
    public static func appendQuoted<Output: ByteOutput>(_ text: String, to bytes: inout Output) {
        text.withUTF8InPlace { Self.appendQuoted(utf8: $0, to: &bytes) }
    }

    /// ``appendQuoted(_:to:)`` for UTF-8 bytes.
    @inlinable
    public static func appendQuoted<Output: ByteOutput>(
        utf8: UnsafeBufferPointer<UInt8>, to bytes: inout Output
    ) {
        bytes.append(UInt8(ascii: "\""))
        Self.appendEscaped(utf8: utf8, to: &bytes)
        bytes.append(UInt8(ascii: "\""))
    }

    /// `text` escaped for use between JSON quotes.
    package static func escaped(_ text: String) -> String {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(text.utf8.count)
        Self.appendEscaped(text, to: &bytes)
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Appends `value` in decimal.
    @inlinable
    public static func appendDecimal<Output: ByteOutput>(_ value: Int64, to bytes: inout Output) {
        if value >= 0, value < 10 {
            bytes.append(UInt8(ascii: "0") + UInt8(value))
            return
        }
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
    @inlinable
    public static func appendDigits<T: BinaryInteger, Output: ByteOutput>(
        _ value: T, width: Int, to bytes: inout Output
    ) {
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
            bytes.append(utf8: UnsafeBufferPointer(rebasing: buffer[0..<width]))
        }
    }

    /// Appends `value` in its shortest exact form, or `null` when it is not finite (JSON has no NaN or
    /// infinity).
    @inlinable
    public static func appendDouble<Output: ByteOutput>(_ value: Double, to bytes: inout Output) {
        guard value.isFinite else {
            bytes.append(ascii: "null")
            return
        }
        // Swift's description is the shortest text that reads back as the same double and uses JSON's
        // exponent syntax (`1e-05`, `1e+20`).
        value.description.withUTF8InPlace { bytes.append(utf8: $0) }
    }

    /// An RFC 3339 timestamp in UTC with milliseconds (`2026-11-22T10:00:00.123Z`) for milliseconds since the
    /// UNIX epoch, computed without Foundation's formatters, which are slow and not thread-safe to share.
    package static func timestamp(epochMilliseconds: Int64) -> String {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(24)
        Self.appendTimestamp(epochMilliseconds: epochMilliseconds, to: &bytes)
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Appends ``timestamp(epochMilliseconds:)``'s UTF-8 to `bytes`, without quotes. A year outside 0...9999
    /// (RFC 3339 has none) is written in full, with its sign: records never carry one, since the APNs client drops
    /// timestamps outside those years.
    @inlinable
    public static func appendTimestamp<Output: ByteOutput>(
        epochMilliseconds: Int64, to bytes: inout Output
    ) {
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
            Self.appendDigits(year, width: 4, to: &bytes)
        } else {
            Self.appendDecimal(year, to: &bytes)
        }
        // The rest is written into 20 bytes in place and appended in one go: every record carries two timestamps,
        // and a field at a time through `appendDigits` took a tenth of the outcome thread's time.
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 20) { text in
            func twoDigits(_ value: Int64, at index: Int) {
                text[index] = UInt8(ascii: "0") &+ UInt8(truncatingIfNeeded: value / 10)
                text[index + 1] = UInt8(ascii: "0") &+ UInt8(truncatingIfNeeded: value % 10)
            }
            text[0] = UInt8(ascii: "-")
            twoDigits(month, at: 1)
            text[3] = UInt8(ascii: "-")
            twoDigits(day, at: 4)
            text[6] = UInt8(ascii: "T")
            twoDigits(rest / 3_600_000, at: 7)
            text[9] = UInt8(ascii: ":")
            twoDigits(rest / 60_000 % 60, at: 10)
            text[12] = UInt8(ascii: ":")
            twoDigits(rest / 1000 % 60, at: 13)
            text[15] = UInt8(ascii: ".")
            text[16] = UInt8(ascii: "0") &+ UInt8(truncatingIfNeeded: rest % 1000 / 100)
            twoDigits(rest % 100, at: 17)
            text[19] = UInt8(ascii: "Z")
            bytes.append(utf8: UnsafeBufferPointer(text))
        }
    }

    @usableFromInline
    static func hexDigit(_ value: UInt8) -> UInt8 {
        value < 10 ? UInt8(ascii: "0") + value : UInt8(ascii: "a") + value - 10
    }
}
