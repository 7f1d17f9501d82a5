/// One thing wrong with a configuration file: what, where, and how to fix it.
///
/// Problems never carry secret values: messages name keys, variables and file paths, never what a secret
/// key, a secret file or an environment variable holding a secret contains.
package struct ConfigurationProblem: Sendable, Hashable, CustomStringConvertible {
    /// The class of a problem, stable for scripts and tests.
    package enum Code: String, Sendable, Hashable, CaseIterable {
        /// The configuration file itself is missing or unreadable.
        case unreadableConfigurationFile = "unreadable-configuration-file"
        /// The file is not well-formed YAML.
        case yamlSyntax = "yaml-syntax"
        /// A key this version does not know.
        case unknownKey = "unknown-key"
        /// A key given twice in one mapping.
        case duplicateKey = "duplicate-key"
        /// A required key is absent.
        case missingKey = "missing-key"
        /// A value of the wrong YAML type (a list where a string belongs, ...).
        case wrongType = "wrong-type"
        /// A value of the right type that is not acceptable (out of range, not one of the allowed values, ...).
        case invalidValue = "invalid-value"
        /// A duration that is not `<number><unit>` with unit `ms`, `s`, `m` or `h`.
        case invalidDuration = "invalid-duration"
        /// `${VAR}` names a variable that is not set and has no default, or the reference is malformed.
        case environmentVariable = "environment-variable"
        /// A file named by the configuration (credentials, CA, secrets) is missing, unreadable or malformed.
        case credentialFile = "credential-file"
        /// A route names an app that is not under `apps`.
        case unknownApp = "unknown-app"
        /// The route compiler refused a route (templates, push type, priority, ...).
        case route = "route"
    }

    /// The class of the problem.
    package var code: Code
    /// The configuration file's path as given.
    package var file: String
    /// The key path, e.g. `routes[1].push_type` or `apns.auth.key_file`; empty for the whole file.
    package var path: String
    /// The 1-based line of the offending key or value, when known.
    package var line: Int?
    /// What is wrong.
    package var message: String
    /// How to fix it, when there is something specific to say.
    package var hint: String?

    /// Creates a problem.
    package init(code: Code, file: String, path: String, line: Int?, message: String, hint: String? = nil) {
        self.code = code
        self.file = file
        self.path = path
        self.line = line
        self.message = message
        self.hint = hint
    }

    /// `file:line: key.path: message (hint)`, the form `pushbridge validate` prints.
    package var description: String {
        var text = self.file
        if let line = self.line {
            text += ":\(line)"
        }
        text += ": "
        if !self.path.isEmpty {
            text += "\(self.path): "
        }
        text += self.message
        if let hint = self.hint {
            text += " (\(hint))"
        }
        return text
    }
}

/// Every problem found in one configuration, reported together so a user fixes them in one pass.
package struct ConfigurationErrors: Error, Sendable, CustomStringConvertible {
    /// The problems, in file order (problems without a line last).
    package var problems: [ConfigurationProblem]

    /// Creates the error from `problems`, which must not be empty.
    package init(problems: [ConfigurationProblem]) {
        self.problems = problems
    }

    /// One problem per line.
    package var description: String {
        self.problems.map(\.description).joined(separator: "\n")
    }
}
