import Routing

extension JSONValue {
    /// This value as indented JSON text (two spaces, members in their order, `"key": value`), ending without
    /// a newline. Strings are escaped exactly as in the compact form that is sent.
    func prettyText(indent: String = "") -> String {
        let inner = indent + "  "
        switch self {
        case .array(let elements) where !elements.isEmpty:
            let lines = elements.map { inner + $0.prettyText(indent: inner) }
            return "[\n" + lines.joined(separator: ",\n") + "\n" + indent + "]"
        case .object(let members) where !members.isEmpty:
            let lines = members.map { member in
                inner + JSONValue.string(member.key).jsonText + ": " + member.value.prettyText(indent: inner)
            }
            return "{\n" + lines.joined(separator: ",\n") + "\n" + indent + "}"
        default:
            return self.jsonText
        }
    }
}
