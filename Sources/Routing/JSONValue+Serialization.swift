extension JSONValue {
    /// The compact JSON text of this value as UTF-8 bytes.
    public func serialized() -> [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(256)
        self.serialize(into: &bytes)
        return bytes
    }

    /// The compact JSON text of this value.
    public var jsonText: String {
        String(decoding: self.serialized(), as: UTF8.self)
    }

    /// The most of a value's JSON text that ``messageExcerpt`` quotes, in bytes.
    static let maximumExcerptBytes = 64

    /// The start of this value's JSON text, for messages that quote an event's value (dead-letter reasons):
    /// at most ``maximumExcerptBytes`` bytes, then `…` when cut, so a reason stays short whatever the event.
    var messageExcerpt: String {
        let text = self.serialized()
        guard text.count > Self.maximumExcerptBytes else { return String(decoding: text, as: UTF8.self) }
        return String(decoding: text.prefix(Self.maximumExcerptBytes), as: UTF8.self) + "…"
    }

    /// Appends the compact JSON text of this value to `bytes`.
    ///
    /// Output is always valid JSON: strings are escaped (``appendEscaped(_:to:)``), integers are written digit
    /// for digit, doubles in their shortest exact form, and non-finite doubles (which JSON cannot express) as
    /// `null`.
    public func serialize(into bytes: inout [UInt8]) {
        switch self {
        case .null:
            bytes.append(contentsOf: "null".utf8)
        case .bool(let value):
            bytes.append(contentsOf: value ? "true".utf8 : "false".utf8)
        case .integer(let value):
            Self.appendInteger(value, to: &bytes)
        case .double(let value):
            Self.appendDouble(value, to: &bytes)
        case .string(let value):
            bytes.append(UInt8(ascii: "\""))
            Self.appendEscaped(value, to: &bytes)
            bytes.append(UInt8(ascii: "\""))
        case .array(let elements):
            bytes.append(UInt8(ascii: "["))
            for (offset, element) in elements.enumerated() {
                if offset > 0 { bytes.append(UInt8(ascii: ",")) }
                element.serialize(into: &bytes)
            }
            bytes.append(UInt8(ascii: "]"))
        case .object(let members):
            bytes.append(UInt8(ascii: "{"))
            for (offset, member) in members.enumerated() {
                if offset > 0 { bytes.append(UInt8(ascii: ",")) }
                bytes.append(UInt8(ascii: "\""))
                Self.appendEscaped(member.key, to: &bytes)
                bytes.append(UInt8(ascii: "\""))
                bytes.append(UInt8(ascii: ":"))
                member.value.serialize(into: &bytes)
            }
            bytes.append(UInt8(ascii: "}"))
        }
    }

    /// Appends `value` in decimal.
    static func appendInteger(_ value: Int64, to bytes: inout [UInt8]) {
        if value >= 0, value < 10 {
            bytes.append(UInt8(ascii: "0") + UInt8(value))
            return
        }
        // Digits are produced backwards into a fixed buffer: no String is made.
        var magnitude = value.magnitude
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 20) { buffer in
            var position = 20
            repeat {
                position -= 1
                buffer[position] = UInt8(ascii: "0") + UInt8(magnitude % 10)
                magnitude /= 10
            } while magnitude > 0
            if value < 0 { bytes.append(UInt8(ascii: "-")) }
            bytes.append(contentsOf: UnsafeBufferPointer(rebasing: buffer[position..<20]))
        }
    }

    /// Appends `value` in its shortest exact form, or `null` when it is not finite.
    static func appendDouble(_ value: Double, to bytes: inout [UInt8]) {
        guard value.isFinite else {
            bytes.append(contentsOf: "null".utf8)
            return
        }
        // Swift's description is the shortest text that reads back as the same double and uses JSON's
        // exponent syntax (`1e-05`, `1e+20`).
        bytes.append(contentsOf: value.description.utf8)
    }

    /// Appends `text` with JSON string escaping, without the surrounding quotes.
    ///
    /// `"` and `\` are escaped, control characters become `\n`, `\t`, ... or `\u00XX`, and everything else,
    /// non-ASCII included, is kept as UTF-8.
    public static func appendEscaped(_ text: String, to bytes: inout [UInt8]) {
        var text = text
        text.withUTF8 { Self.appendEscaped(utf8: $0, to: &bytes) }
    }

    /// Appends UTF-8 `utf8` with JSON string escaping, without the surrounding quotes.
    static func appendEscaped(utf8: UnsafeBufferPointer<UInt8>, to bytes: inout [UInt8]) {
        var runStart = 0
        for index in 0..<utf8.count {
            let byte = utf8[index]
            guard byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") else { continue }
            if runStart < index {
                bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[runStart..<index]))
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
                let hex: [UInt8] = Array("0123456789abcdef".utf8)
                bytes.append(contentsOf: [UInt8(ascii: "u"), UInt8(ascii: "0"), UInt8(ascii: "0")])
                bytes.append(hex[Int(byte >> 4)])
                bytes.append(hex[Int(byte & 0x0F)])
            }
        }
        if runStart < utf8.count {
            bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[runStart..<utf8.count]))
        }
    }
}
