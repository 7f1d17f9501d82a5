import EgressProxy
import Foundation
import SafeText
import Yams

/// Walks the composed YAML tree: every read records where a key path is, every fault becomes a
/// ``ConfigurationProblem``, and reading goes on so that all problems are found in one pass.
///
/// Used synchronously by one load only, so it is a plain class and not `Sendable`.
final class ConfigurationReader {
    /// The configuration file's path as given, for problems.
    let file: String
    /// `${VAR}` expansion.
    let expansion: EnvironmentExpansion
    /// Everything found so far.
    private(set) var problems: [ConfigurationProblem] = []
    /// The line of every key path read, for problems found later (route compile errors).
    private(set) var lines: [String: Int] = [:]
    /// Values substituted for `${VAR}` references so far, longest first, with the reference to show instead:
    /// the environment is where secrets live, so no problem shows a value that came from it, whatever the key
    /// (a route's `expiration: ${SECRET}` would otherwise quote the secret in its compile error).
    private(set) var substitutions: [(value: String, reference: String)] = []

    /// The environment's proxy (`HTTPS_PROXY`, `NO_PROXY`) for the blocks without `proxy`, read once; and whether a
    /// problem with it was reported already (once is enough, however many blocks use it).
    private(set) lazy var environmentProxy = Result { () throws(EnvironmentProxyError) in
        try EgressProxyPolicy.fromEnvironment(self.expansion.environment)
    }
    var reportedEnvironmentProxy = false

    init(file: String, environment: [String: String]) {
        self.file = file
        self.expansion = EnvironmentExpansion(environment: environment)
    }

    /// Records a problem.
    func report(
        _ code: ConfigurationProblem.Code, at path: String, line: Int?, _ message: String, hint: String? = nil
    ) {
        self.problems.append(
            ConfigurationProblem(
                code: code, file: self.file, path: path, line: line, message: self.redacted(message),
                hint: hint.map(self.redacted)
            )
        )
    }

    /// Remembers the variables `text` referred to, so that their values never appear in a problem.
    func noteSubstitutions(in text: String) {
        var rest = text[...]
        while let start = rest.range(of: "${") {
            let after = rest[start.upperBound...]
            let name = after.prefix { $0 == "_" || ($0.isASCII && ($0.isLetter || $0.isNumber)) }
            if let value = self.expansion.environment[String(name)], value.count >= Self.minimumRedactedLength,
                !self.substitutions.contains(where: { $0.value == value })
            {
                self.substitutions.append((value, "${\(name)}"))
                self.substitutions.sort { $0.value.count > $1.value.count }
            }
            rest = after
        }
    }

    /// Values shorter than this are not redacted: replacing `1` or `on` in a message would garble it, and such
    /// values are no secrets.
    static let minimumRedactedLength = 4

    private func redacted(_ text: String) -> String {
        var text = text
        for substitution in self.substitutions where text.contains(substitution.value) {
            text = text.replacingOccurrences(of: substitution.value, with: substitution.reference)
        }
        return text
    }

    /// Remembers that `path` is on `line`.
    func note(_ path: String, line: Int?) {
        if let line, self.lines[path] == nil {
            self.lines[path] = line
        }
    }

    /// The line of `path`, or of its closest ancestor whose line is known.
    func line(of path: String) -> Int? {
        var path = path
        while true {
            if let line = self.lines[path] {
                return line
            }
            guard let cut = path.lastIndex(where: { $0 == "." || $0 == "[" }) else {
                return nil
            }
            path = String(path[..<cut])
        }
    }
}

/// A YAML value at a key path.
struct ConfigValue {
    /// The node.
    let node: Node
    /// Its key path, e.g. `routes[0].payload.aps`.
    let path: String
    /// The load it belongs to.
    let reader: ConfigurationReader

    /// The 1-based line of the value.
    var line: Int? { self.node.mark?.line }

    /// Whether the value is YAML `null` (`null`, `~`, or nothing).
    var isNull: Bool {
        self.node.scalar != nil && self.tagName == .null
    }

    /// A child value.
    func child(_ node: Node, path: String) -> ConfigValue {
        ConfigValue(node: node, path: path, reader: self.reader)
    }

    /// Reports a problem at this value.
    func report(_ code: ConfigurationProblem.Code, _ message: String, hint: String? = nil) {
        self.reader.report(code, at: self.path, line: self.line, message, hint: hint)
    }

    /// The node's resolved YAML tag (`Tag.name` itself is internal to Yams; its description is the name).
    var tagName: Tag.Name {
        Tag.Name(rawValue: self.node.tag.description)
    }

    /// The name of this node's YAML kind, for "wrong type" messages.
    var kindName: String {
        switch self.node {
        case .mapping: "a mapping"
        case .sequence: "a list"
        case .scalar:
            switch self.tagName {
            case .int: "a number"
            case .float: "a number"
            case .bool: "a boolean"
            case .null: "null"
            default: "a string"
            }
        }
    }

    /// The scalar's text after `${VAR}` expansion; reports a problem and returns `nil` when the value is not
    /// a scalar or a reference cannot be expanded. `expected` names the wanted type for the message.
    func text(expected: String) -> String? {
        guard let scalar = self.node.scalar else {
            self.report(.wrongType, "expected \(expected), found \(self.kindName)")
            return nil
        }
        return self.expand(scalar.string)
    }

    /// `text` with `${VAR}` references expanded; reports a problem and returns `nil` when one cannot be.
    ///
    /// The message never shows the value of a secret key (``isSecret``): a malformed reference is located by
    /// its position only, and an unset variable is named only when the whole value is that one reference (the
    /// usual `sasl.password: ${KAFKA_PASSWORD}`), since in `Hunter2${...}` the "name" is part of the secret.
    func expand(_ text: String) -> String? {
        do {
            let expansion = try self.reader.expansion.expand(text)
            // Paths of files (`key_file`, `ca_file`, ...) are shown: a problem must say which file is missing.
            if expansion.expanded && !self.path.hasSuffix("_file") { self.reader.noteSubstitutions(in: text) }
            return expansion.text
        } catch {
            switch error {
            case .unset(let variable):
                if !self.isSecret || EnvironmentExpansion.isSingleReference(text, to: variable) {
                    self.report(
                        .environmentVariable, "environment variable \(variable) is not set",
                        hint: "set it, or give a default with ${\(variable):-default}"
                    )
                } else {
                    self.report(
                        .environmentVariable,
                        "the value refers to an environment variable that is not set (the value of a secret key "
                            + "is not shown)",
                        hint: "set the variable; to write a literal ${ in a secret, write $${"
                    )
                }
            case .malformed(let reference, let offset):
                if self.isSecret {
                    self.report(
                        .environmentVariable,
                        "malformed variable reference at character \(offset + 1) of the value (the value of a secret "
                            + "key is not shown)",
                        hint: "write ${NAME} or ${NAME:-default}; $${ gives a literal ${"
                    )
                } else {
                    self.report(
                        .environmentVariable,
                        "malformed variable reference \(SafeText.excerpt(reference, maxBytes: 40))",
                        hint: "write ${NAME} or ${NAME:-default}; $${ gives a literal ${"
                    )
                }
            }
        }
        return nil
    }

    /// Whether this key holds a secret, so that no problem may show its value (docs/configuration.md, "Secrets
    /// in errors"): any librdkafka property whose name looks like a secret, and `p12_password`.
    var isSecret: Bool {
        ConfigurationSecrets.isSecret(path: self.path)
    }

    /// A string (any scalar: `123` reads as `"123"`).
    func string() -> String? {
        self.text(expected: "a string")
    }

    /// A non-empty string.
    func nonEmptyString() -> String? {
        guard let text = self.string() else {
            return nil
        }
        guard !text.trimmingWhitespace().isEmpty else {
            self.report(.invalidValue, "must not be empty")
            return nil
        }
        return text
    }

    /// A string that may be left empty (e.g. through `${VAR:-}`); empty means not given.
    func optionalString() -> String? {
        guard let text = self.string(), !text.trimmingWhitespace().isEmpty else {
            return nil
        }
        return text
    }

    /// `true` or `false` (after `${VAR}` expansion, so `${FEEDBACK:-true}` works).
    func boolean() -> Bool? {
        guard let text = self.text(expected: "true or false") else {
            return nil
        }
        switch text.trimmingWhitespace() {
        case "true": return true
        case "false": return false
        default:
            self.report(.wrongType, "expected true or false, found \(self.describe(text))")
            return nil
        }
    }

    /// An integer in `range`.
    func integer(in range: ClosedRange<Int>) -> Int? {
        guard let text = self.text(expected: "an integer") else {
            return nil
        }
        guard let value = Int(text.trimmingWhitespace()) else {
            self.report(.wrongType, "expected an integer, found \(self.describe(text))")
            return nil
        }
        guard range.contains(value) else {
            let upper = range.upperBound == Int.max ? "" : " and at most \(range.upperBound)"
            let shown = self.isSecret ? "the value" : "\(value)"
            self.report(.invalidValue, "\(shown) is out of range: must be at least \(range.lowerBound)\(upper)")
            return nil
        }
        return value
    }

    /// A duration such as `250ms`, `10s`, `5m`, `1h`, between `minimum` and `maximum`.
    ///
    /// Every configuration duration has an upper bound: an unbounded one (`request_timeout: 3000000h`) was
    /// accepted and overflowed later, when turned into nanoseconds for a timer.
    func duration(minimum: Duration = .zero, maximum: Duration) -> Duration? {
        guard let text = self.text(expected: "a duration") else {
            return nil
        }
        guard let duration = Duration(configuration: text) else {
            self.report(
                .invalidDuration, "\(self.describe(text)) is not a duration",
                hint: "a whole number with a unit: 250ms, 10s, 5m, 1h, or combined: 1h30m"
            )
            return nil
        }
        guard duration >= minimum else {
            self.report(.invalidValue, "must be at least \(Self.format(minimum))")
            return nil
        }
        guard duration <= maximum else {
            self.report(
                .invalidValue, "\(self.describe(text)) is too long: must be at most \(Self.format(maximum))",
                hint: "write a duration of \(Self.format(maximum)) or less"
            )
            return nil
        }
        return duration
    }

    /// One of `Value`'s raw values.
    func oneOf<Value: RawRepresentable & CaseIterable>(_: Value.Type) -> Value? where Value.RawValue == String {
        guard let text = self.text(expected: "a string") else {
            return nil
        }
        if let value = Value(rawValue: text.trimmingWhitespace()) {
            return value
        }
        let allowed = Value.allCases.map(\.rawValue)
        var hint = "allowed: \(allowed.joined(separator: ", "))"
        if let suggestion = Suggestion.closest(to: text, among: allowed) {
            hint = "did you mean \(suggestion)? " + hint
        }
        self.report(.invalidValue, "\(self.describe(text)) is not allowed", hint: hint)
        return nil
    }

    /// A mapping whose keys must be among `known`; unknown keys are reported with the closest known key.
    /// Reports and returns `nil` when the value is not a mapping.
    func mapping(known: [String]?) -> ConfigMapping? {
        guard case .mapping(let mapping) = self.node else {
            self.report(.wrongType, "expected a mapping (key: value lines), found \(self.kindName)")
            return nil
        }
        var entries: [ConfigMapping.Entry] = []
        var seen = Set<String>()
        for (keyNode, valueNode) in mapping {
            guard let key = keyNode.scalar?.string else {
                self.reader.report(.wrongType, at: self.path, line: keyNode.mark?.line, "a key must be a plain string")
                continue
            }
            let path = self.path.isEmpty ? key : "\(self.path).\(key)"
            let keyLine = keyNode.mark?.line
            guard seen.insert(key).inserted else {
                self.reader.report(.duplicateKey, at: path, line: keyLine, "key given more than once")
                continue
            }
            if let known, !known.contains(key) {
                var hint: String?
                if let suggestion = Suggestion.closest(to: key, among: known) {
                    hint = "did you mean \(suggestion)?"
                } else {
                    hint = "known keys here: \(known.joined(separator: ", "))"
                }
                self.reader.report(.unknownKey, at: path, line: keyLine, "unknown key", hint: hint)
                continue
            }
            self.reader.note(path, line: keyLine)
            entries.append(ConfigMapping.Entry(key: key, keyLine: keyLine, value: self.child(valueNode, path: path)))
        }
        return ConfigMapping(entries: entries, owner: self)
    }

    /// The elements of a list. Reports and returns `nil` when the value is not a list.
    func sequence() -> [ConfigValue]? {
        guard case .sequence(let sequence) = self.node else {
            self.report(.wrongType, "expected a list, found \(self.kindName)")
            return nil
        }
        return sequence.enumerated().map { index, node in
            let path = "\(self.path)[\(index)]"
            self.reader.note(path, line: node.mark?.line)
            return self.child(node, path: path)
        }
    }

    /// `text` quoted for a message: at most 60 characters, control characters escaped; for a secret key
    /// (``isSecret``) only the words "the value", never any of it.
    func describe(_ text: String) -> String {
        if self.isSecret {
            return "the value (not shown: the key holds a secret)"
        }
        return "\"\(SafeText.excerpt(text, maxBytes: 60))\""
    }

    /// A duration as a configuration would write it.
    static func format(_ duration: Duration) -> String {
        // Only bounds and values checked against them come here, but a message must never trap: saturate.
        let (scaled, overflow) = duration.components.seconds.multipliedReportingOverflow(by: 1000)
        let (sum, sumOverflow) = scaled.addingReportingOverflow(
            duration.components.attoseconds / 1_000_000_000_000_000)
        let milliseconds = overflow || sumOverflow ? Int64.max : sum
        if milliseconds % 3_600_000 == 0 { return "\(milliseconds / 3_600_000)h" }
        if milliseconds % 60_000 == 0 { return "\(milliseconds / 60_000)m" }
        if milliseconds % 1000 == 0 { return "\(milliseconds / 1000)s" }
        return "\(milliseconds)ms"
    }
}

/// A mapping's entries that passed the known-key check, in file order.
struct ConfigMapping {
    /// One `key: value`.
    struct Entry {
        let key: String
        let keyLine: Int?
        let value: ConfigValue
    }

    let entries: [Entry]
    /// The mapping itself.
    let owner: ConfigValue

    /// The value of `key`, or `nil` when it is absent or `null`.
    subscript(key: String) -> ConfigValue? {
        guard let entry = self.entries.first(where: { $0.key == key }), !entry.value.isNull else {
            return nil
        }
        return entry.value
    }

    /// Whether `key` is present (even as `null`).
    func contains(_ key: String) -> Bool {
        self.entries.contains { $0.key == key }
    }

    /// The value of `key`; reports a missing-key problem when it is absent or `null`.
    func required(_ key: String, hint: String? = nil) -> ConfigValue? {
        if let value = self[key] {
            return value
        }
        let path = self.owner.path.isEmpty ? key : "\(self.owner.path).\(key)"
        let line =
            self.entries.first(where: { $0.key == key })?.keyLine ?? self.owner.reader.lines[self.owner.path]
            ?? self.owner.line
        self.owner.reader.report(.missingKey, at: path, line: line, "required key is missing", hint: hint)
        return nil
    }
}
