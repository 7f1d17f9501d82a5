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
        /// `${` without a closing `}`, or an invalid variable name: the reference (at most 40 characters) and
        /// its offset in characters. The reader shows the reference only for keys that hold no secret.
        case malformed(reference: String, offset: Int)
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
                throw .malformed(
                    reference: String(rest.prefix(40)), offset: text.distance(from: text.startIndex, to: index))
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
                throw .malformed(
                    reference: String(text[index...close].prefix(40)),
                    offset: text.distance(from: text.startIndex, to: index))
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

    /// Whether `text` is exactly one reference to `variable`: `${NAME}` or `${NAME:-default}`, spaces around
    /// allowed. Naming the variable then reveals nothing of a secret value.
    static func isSingleReference(_ text: String, to variable: String) -> Bool {
        let trimmed = text.trimmingWhitespace()
        guard trimmed.hasPrefix("${" + variable), trimmed.hasSuffix("}") else {
            return false
        }
        let rest = trimmed.dropFirst(2 + variable.count)
        return rest == "}" || (rest.hasPrefix(":-") && rest.dropLast().firstIndex(of: "}") == nil)
    }

    /// Shell-style names: a letter or `_`, then letters, digits or `_`.
    static func isVariableName(_ name: Substring) -> Bool {
        guard let first = name.first, first == "_" || (first.isASCII && first.isLetter) else {
            return false
        }
        return name.allSatisfy { $0 == "_" || ($0.isASCII && ($0.isLetter || $0.isNumber)) }
    }
}
