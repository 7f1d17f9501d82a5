import APNSCore

extension JSONValue {
    /// The compact JSON text of this value as UTF-8 bytes.
    package func serialized() -> [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(256)
        self.serialize(into: &bytes)
        return bytes
    }

    /// The compact JSON text of this value.
    package var jsonText: String {
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
    /// Output is always valid JSON: strings are escaped (``APNSCore/JSONText/appendEscaped(_:to:)``), integers are written digit
    /// for digit, doubles in their shortest exact form, and non-finite doubles (which JSON cannot express) as
    /// `null`.
    package func serialize(into bytes: inout [UInt8]) {
        switch self {
        case .null:
            bytes.append(contentsOf: "null".utf8)
        case .bool(let value):
            bytes.append(contentsOf: value ? "true".utf8 : "false".utf8)
        case .integer(let value):
            JSONText.appendDecimal(value, to: &bytes)
        case .double(let value):
            JSONText.appendDouble(value, to: &bytes)
        case .string(let value):
            JSONText.appendQuoted(value, to: &bytes)
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
                JSONText.appendQuoted(member.key, to: &bytes)
                bytes.append(UInt8(ascii: ":"))
                member.value.serialize(into: &bytes)
            }
            bytes.append(UInt8(ascii: "}"))
        }
    }
}
