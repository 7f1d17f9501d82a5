import Foundation

/// Expands `${VAR}` and `${VAR:-default}` inside configuration values from an environment.
///
/// `$${` stands for a literal `${`. A `$` not followed by `{` is kept as it is. Defaults are taken
/// literally (no nested expansion). `${VAR:-default}` uses the default when `VAR` is unset or empty, like
/// the shell.
struct EnvironmentExpansion: Sendable {
    /// A reason an expansion failed. Never includes a variable's value.
    enum Failure: Error, Equatable {
        /// `${NAME}` with `NAME` unset (or empty) and no default.
        case unset(variable: String)
        /// `${` without a closing `}`, or an invalid variable name.
        case malformed(reference: String)
    }

    /// The variables, by name.
    var environment: [String: String]

    /// The result of expanding `text`, and whether it contained any reference at all.
    func expand(_ text: String) throws(Failure) -> (text: String, expanded: Bool) {
        guard text.contains("$") else {
            return (text, false)
        }
        var output = ""
        var expanded = false
        var index = text.startIndex
        while index < text.endIndex {
            let character = text[index]
            guard character == "$" else {
                output.append(character)
                index = text.index(after: index)
                continue
            }
            let rest = text[index...]
            if rest.hasPrefix("$${") {
                output += "${"
                index = text.index(index, offsetBy: 3)
                expanded = true
                continue
            }
            guard rest.hasPrefix("${") else {
                output.append(character)
                index = text.index(after: index)
                continue
            }
            guard let close = rest.firstIndex(of: "}") else {
                throw .malformed(reference: String(rest.prefix(40)))
            }
            let body = text[text.index(index, offsetBy: 2)..<close]
            let name: Substring
            let fallback: Substring?
            if let separator = body.range(of: ":-") {
                name = body[..<separator.lowerBound]
                fallback = body[separator.upperBound...]
            } else {
                name = body
                fallback = nil
            }
            guard Self.isVariableName(name) else {
                throw .malformed(reference: String(text[index...close]))
            }
            if let value = self.environment[String(name)], !value.isEmpty {
                output += value
            } else if let fallback {
                output += fallback
            } else {
                throw .unset(variable: String(name))
            }
            expanded = true
            index = text.index(after: close)
        }
        return (output, expanded)
    }

    /// Shell-style names: a letter or `_`, then letters, digits or `_`.
    static func isVariableName(_ name: Substring) -> Bool {
        guard let first = name.first, first == "_" || (first.isASCII && first.isLetter) else {
            return false
        }
        return name.allSatisfy { $0 == "_" || ($0.isASCII && ($0.isLetter || $0.isNumber)) }
    }
}
