import Foundation
import Routing
import Yams

/// Loads a PushBridge configuration file (docs/configuration.md): YAML, `${VAR}` expansion, `*_file` secrets, durations,
/// defaults, credential files and routes; every problem is collected and reported at once.
package struct ConfigurationLoader: Sendable {
    /// The variables `${VAR}` references are expanded from.
    package var environment: [String: String]
    /// Whether credential files (`key_file`, `p12_file`, `cert_file`, `ca_file`) must exist and parse.
    /// `pushbridge render` turns this off: a dry run needs no credentials. Off, no file is read at all, so
    /// secrets given as `*_file` come back empty; such a configuration must not be used to send.
    package var checksCredentialFiles: Bool

    /// Creates a loader reading `${VAR}` from `environment` (by default the process's).
    package init(
        environment: [String: String] = ProcessInfo.processInfo.environment,
        checksCredentialFiles: Bool = true
    ) {
        self.environment = environment
        self.checksCredentialFiles = checksCredentialFiles
    }

    /// The configuration file used when none is given: `$PUSHBRIDGE_CONFIG`, else `config/pushbridge.yaml`.
    package static func defaultPath(environment: [String: String] = ProcessInfo.processInfo.environment) -> String {
        if let path = environment["PUSHBRIDGE_CONFIG"], !path.isEmpty {
            return path
        }
        return "config/pushbridge.yaml"
    }

    /// Loads and checks the configuration file at `path`.
    package func load(file path: String) throws(ConfigurationErrors) -> LoadedConfiguration {
        let text: String
        do {
            let data = try Data(contentsOf: URL(fileURLWithPath: path))
            text = String(decoding: data, as: UTF8.self)
        } catch {
            throw ConfigurationErrors(problems: [
                ConfigurationProblem(
                    code: .unreadableConfigurationFile, file: path, path: "", line: nil,
                    message: "cannot read the configuration file",
                    hint: "give one with --config FILE or PUSHBRIDGE_CONFIG"
                )
            ])
        }
        return try self.load(yaml: text, file: path)
    }

    /// Loads and checks configuration `yaml`; `file` names it in problems.
    package func load(yaml: String, file: String) throws(ConfigurationErrors) -> LoadedConfiguration {
        let reader = ConfigurationReader(file: file, environment: self.environment)
        let root: Node?
        do {
            root = try Yams.compose(yaml: yaml)
        } catch {
            throw ConfigurationErrors(problems: [Self.syntaxProblem(error, file: file)])
        }
        guard let root else {
            throw ConfigurationErrors(problems: [
                ConfigurationProblem(
                    code: .missingKey, file: file, path: "", line: nil, message: "the configuration file is empty",
                    hint: "start from config/pushbridge.yaml"
                )
            ])
        }
        let document = ConfigValue(node: root, path: "", reader: reader)
        let result = SectionParser(reader: reader, checksFiles: self.checksCredentialFiles).parse(document)
        var problems = reader.problems
        if !self.checksCredentialFiles {
            problems.removeAll { $0.code == .credentialFile }
        }
        guard problems.isEmpty, let result else {
            throw ConfigurationErrors(problems: Self.ordered(problems))
        }
        return result
    }

    /// Problems in file order; those without a line keep their order at the end.
    static func ordered(_ problems: [ConfigurationProblem]) -> [ConfigurationProblem] {
        problems.enumerated().sorted { lhs, rhs in
            switch (lhs.element.line, rhs.element.line) {
            case (let left?, let right?): left != right ? left < right : lhs.offset < rhs.offset
            case (.some, nil): true
            case (nil, .some): false
            case (nil, nil): lhs.offset < rhs.offset
            }
        }.map(\.element)
    }

    /// A YAML syntax error as a problem with its line.
    static func syntaxProblem(_ error: any Error, file: String) -> ConfigurationProblem {
        var line: Int?
        var message = "not valid YAML"
        if let error = error as? YamlError {
            switch error {
            case .scanner(let context, let problem, let mark, _), .parser(let context, let problem, let mark, _),
                .composer(let context, let problem, let mark, _):
                line = mark.line
                message = "not valid YAML: \(problem)"
                if let context {
                    message += " \(context.text)"
                }
            case .reader(let problem, _, _, _):
                message = "not valid YAML: \(problem)"
            default:
                break
            }
        }
        return ConfigurationProblem(
            code: .yamlSyntax, file: file, path: "", line: line, message: message,
            hint: "check indentation and quoting near this line"
        )
    }
}

/// A loaded configuration with its routes compiled.
package struct LoadedConfiguration: Sendable {
    /// The settings.
    package var configuration: BridgeConfiguration
    /// The compiled routes of ``BridgeConfiguration/routes``.
    package var router: Router
}
