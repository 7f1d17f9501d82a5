import APNSCore

/// Why bytes are not a JSON document, and where the parser stopped.
package struct JSONParseError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What went wrong.
    package enum Code: String, Sendable, Hashable {
        /// The input ended inside a value (or was empty).
        case unexpectedEnd
        /// A byte that cannot start or continue a value here.
        case unexpectedByte
        /// A number that does not follow JSON's grammar.
        case invalidNumber
        /// A bad escape sequence or an unescaped control character in a string.
        case invalidString
        /// String bytes that are not UTF-8.
        case invalidUTF8
        /// Something other than whitespace after the document.
        case trailingBytes
        /// Arrays and objects nested deeper than ``JSONValue/maximumDepth``.
        case tooDeep
        /// A number whose magnitude is beyond the largest finite double (about 1.8e308), such as `1e999999`
        /// or an integer of 310 digits. JSON's grammar allows it, but no JSON number type PushBridge writes
        /// can hold it (it would become `null` or `Infinity`), so the document is refused, wherever the
        /// number is (see ``JSONParseError/path``).
        case numberOutOfRange
        /// A document of 4 GiB or more (``JSONTape/maximumBytes``): larger than any Kafka record can be.
        case tooLarge
    }

    /// What went wrong.
    package var code: Code
    /// The byte offset where the parser stopped.
    package var byteOffset: Int
    /// For ``Code/numberOutOfRange``: where the number is, as member names and array indices from the root
    /// (`["order", "items", "3", "price"]`); empty when the document itself is the number. Empty for the
    /// other codes, whose byte offset says enough.
    package var path: [String]

    /// Creates an error.
    package init(code: Code, byteOffset: Int, path: [String] = []) {
        self.code = code
        self.byteOffset = byteOffset
        self.path = path
    }

    package var description: String {
        let what =
            switch self.code {
            case .unexpectedEnd: "unexpected end of input"
            case .unexpectedByte: "unexpected character"
            case .invalidNumber: "invalid number"
            case .invalidString: "invalid string (bad escape or raw control character)"
            case .invalidUTF8: "invalid UTF-8 in a string"
            case .trailingBytes: "unexpected data after the JSON value"
            case .tooDeep: "nested deeper than \(JSONValue.maximumDepth) levels"
            case .numberOutOfRange: "number out of range at \(self.pathText)"
            case .tooLarge: "a document of 4 GiB or more"
            }
        return "\(what) at byte \(self.byteOffset)"
    }

    /// ``path`` as a dotted path, as routes write them (`order.items.3.price`), or `the top level`; bounded
    /// to ``maximumPathTextBytes`` (names longer than 64 bytes are cut, and so is the middle of a long path)
    /// and with control characters escaped, since it goes into a dead letter's header.
    package var pathText: String {
        guard !self.path.isEmpty else { return "the top level" }
        var bytes: [UInt8] = []
        for (offset, segment) in self.path.enumerated() {
            if offset > 0 { bytes.append(UInt8(ascii: ".")) }
            var segment = segment
            if segment.utf8.count > 64 {
                segment = String(decoding: segment.utf8.prefix(64), as: UTF8.self) + "…"
            }
            JSONText.appendEscaped(segment, to: &bytes)
        }
        let limit = Self.maximumPathTextBytes
        if bytes.count > limit {
            // Keep both ends: the first names say which part of the event, the last ones which field.
            let ellipsis = Array(" … ".utf8)
            let keep = (limit - ellipsis.count) / 2
            bytes = Array(bytes.prefix(keep)) + ellipsis + Array(bytes.suffix(keep))
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// The longest ``pathText``, in bytes (a little more when the cut falls inside a character).
    package static let maximumPathTextBytes = 256
}
