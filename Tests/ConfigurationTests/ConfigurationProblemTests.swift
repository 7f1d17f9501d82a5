import Configuration
import Foundation
import Testing

/// Every class of misconfiguration is reported with its key path, its line and a message that says how to fix
/// it; all problems of a file are reported at once.
@Suite struct ConfigurationProblemTests {
    let files: TestFiles

    init() throws {
        self.files = try TestFiles()
    }

    /// The only problem `yaml` has; records an issue when there are more or none.
    func onlyProblem(_ yaml: String, environment: [String: String] = [:]) throws -> ConfigurationProblem {
        let problems = self.files.problems(yaml, environment: environment)
        #expect(problems.count == 1, "\(problems)")
        return try #require(problems.first)
    }

    @Test func unknownKeySuggestsTheClosestKnownKey() throws {
        let yaml = minimalYAML.replacingOccurrences(of: "    key_id:", with: "    keyid:")
        let problems = self.files.problems(yaml)
        let unknown = try #require(problems.first { $0.code == .unknownKey })
        #expect(unknown.path == "apns.auth.keyid")
        #expect(unknown.line == 7)
        #expect(unknown.hint == "did you mean key_id?")
        #expect(unknown.description == "test.yaml:7: apns.auth.keyid: unknown key (did you mean key_id?)")
    }

    @Test func unknownTopLevelKeySuggestsTheSection() throws {
        let problem = try self.onlyProblem(minimalYAML + "loging:\n  level: debug\n")
        #expect(problem.code == .unknownKey)
        #expect(problem.path == "loging")
        #expect(problem.line == 17)
        #expect(problem.hint == "did you mean logging?")
    }

    @Test func unknownKeyFarFromAnyKnownKeyListsTheKnownKeys() throws {
        let problem = try self.onlyProblem(minimalYAML + "shutdown:\n  grace: 5s\n")
        #expect(problem.path == "shutdown.grace")
        #expect(problem.hint == "known keys here: drain_timeout, rebalance_drain_timeout")
    }

    @Test func wrongTypeNamesWhatWasExpectedAndFound() throws {
        let yaml = minimalYAML.replacingOccurrences(of: "apns:\n", with: "apns:\n  connections: [1, 2]\n")
        let problem = try self.onlyProblem(yaml)
        #expect(problem.code == .wrongType)
        #expect(problem.path == "apns.connections")
        #expect(problem.line == 4)
        #expect(problem.message == "expected an integer, found a list")
    }

    @Test func textWhereANumberBelongsIsAWrongType() throws {
        let yaml = minimalYAML.replacingOccurrences(of: "apns:\n", with: "apns:\n  connections: two\n")
        let problem = try self.onlyProblem(yaml)
        #expect(problem.code == .wrongType)
        #expect(problem.message == "expected an integer, found \"two\"")
    }

    @Test func outOfRangeNumberSaysTheRange() throws {
        let yaml = minimalYAML.replacingOccurrences(of: "apns:\n", with: "apns:\n  connections: 0\n")
        let problem = try self.onlyProblem(yaml)
        #expect(problem.code == .invalidValue)
        #expect(problem.message == "0 is out of range: must be at least 1 and at most 64")
    }

    @Test func badDurationShowsTheAcceptedForms() throws {
        let yaml = minimalYAML.replacingOccurrences(of: "apns:\n", with: "apns:\n  request_timeout: 10 seconds\n")
        let problem = try self.onlyProblem(yaml)
        #expect(problem.code == .invalidDuration)
        #expect(problem.path == "apns.request_timeout")
        #expect(problem.line == 4)
        #expect(problem.message == "\"10 seconds\" is not a duration")
        #expect(problem.hint?.contains("250ms, 10s, 5m, 1h") == true)
    }

    @Test func badEnumValueListsTheAllowedValues() throws {
        let yaml = minimalYAML.replacingOccurrences(of: "apns:\n", with: "apns:\n  environment: prod\n")
        let problem = try self.onlyProblem(yaml)
        #expect(problem.code == .invalidValue)
        #expect(problem.path == "apns.environment")
        #expect(problem.hint == "did you mean production? allowed: production, sandbox")
    }

    @Test func logLevelOutsideTheListIsRejected() throws {
        let problem = try self.onlyProblem(minimalYAML + "logging:\n  level: verbose\n")
        #expect(problem.path == "logging.level")
        #expect(problem.line == 18)
        #expect(problem.hint == "allowed: trace, debug, info, notice, warning, error")
    }

    @Test func missingRequiredKeyIsNamed() throws {
        let yaml = minimalYAML.replacingOccurrences(of: "  bootstrap_servers: embedded\n", with: "  group_id: g\n")
        let problem = try self.onlyProblem(yaml)
        #expect(problem.code == .missingKey)
        #expect(problem.path == "kafka.bootstrap_servers")
        #expect(problem.line == 1)
    }

    @Test func missingCredentialFileIsNamedByPath() throws {
        let problem = try self.onlyProblem(minimalYAML, environment: ["KEY_FILE": "/nonexistent/AuthKey_X.p8"])
        #expect(problem.code == .credentialFile)
        #expect(problem.path == "apns.auth.key_file")
        #expect(problem.line == 6)
        #expect(problem.message == "file /nonexistent/AuthKey_X.p8 does not exist")
    }

    @Test func credentialFileThatIsNotAP8KeyIsRejected() throws {
        let problem = try self.onlyProblem(minimalYAML, environment: ["KEY_FILE": self.files.path("ca.pem")])
        #expect(problem.code == .credentialFile)
        #expect(problem.message.hasPrefix("\(self.files.path("ca.pem")) is not an APNs auth key"))
    }

    @Test func missingCAFileIsNamedByPath() throws {
        let yaml = minimalYAML.replacingOccurrences(of: "apns:\n", with: "apns:\n  ca_file: /nonexistent/ca.pem\n")
        let problem = try self.onlyProblem(yaml)
        #expect(problem.code == .credentialFile)
        #expect(problem.path == "apns.ca_file")
        #expect(problem.message == "file /nonexistent/ca.pem does not exist")
    }

    @Test func unsetVariableWithoutDefaultNamesKeyAndVariable() throws {
        let problem = try self.onlyProblem(minimalYAML, environment: ["KEY_FILE": ""])
        #expect(problem.code == .environmentVariable)
        #expect(problem.path == "apns.auth.key_file")
        #expect(problem.line == 6)
        #expect(problem.message == "environment variable KEY_FILE is not set")
        #expect(problem.hint == "set it, or give a default with ${KEY_FILE:-default}")
    }

    @Test func malformedVariableReferenceIsReported() throws {
        let yaml = minimalYAML.replacing("bootstrap_servers: embedded", with: "bootstrap_servers: ${BROKERS")
        let problem = try self.onlyProblem(yaml)
        #expect(problem.code == .environmentVariable)
        #expect(problem.path == "kafka.bootstrap_servers")
    }

    @Test func routeWithEmptyInputTopicIsReported() throws {
        let yaml = minimalYAML.replacingOccurrences(of: "input_topic: greetings", with: "input_topic: \"\"")
        let problems = self.files.problems(yaml)
        let problem = try #require(problems.first)
        #expect(problem.path == "routes[0].input_topic")
        #expect(problem.line == 11)
        #expect(problem.message == "must not be empty")
        #expect(problems.allSatisfy { $0.path == "routes[0].input_topic" })
    }

    @Test func routeReadingAnOutputTopicIsReported() throws {
        let yaml = minimalYAML.replacing("input_topic: greetings", with: "input_topic: pushbridge.outcomes")
        let problem = try self.onlyProblem(yaml)
        #expect(problem.code == .invalidValue)
        #expect(problem.path == "routes[0].input_topic")
        #expect(problem.line == 11)
    }

    @Test func routeNamingAnUnknownAppIsReportedWithTheKnownApps() throws {
        let yaml = minimalYAML.replacingOccurrences(
            of: "routes:\n",
            with: """
                apps:
                  shop-sandbox:
                    auth: { type: token, key_file: "${KEY_FILE}", key_id: ABC123DEFG, team_id: DEF123GHIJ }
                routes:

                """
        ).replacing("    input_topic: greetings\n", with: "    input_topic: greetings\n    app: shop-sandbx\n")
        let problem = try self.onlyProblem(yaml)
        #expect(problem.code == .unknownApp)
        #expect(problem.path == "routes[0].app")
        #expect(problem.line == 15)
        #expect(problem.hint == "did you mean shop-sandbox? apps: defines shop-sandbox")
    }

    @Test func duplicateKeyIsReported() throws {
        let yaml = minimalYAML.replacing(
            "  bootstrap_servers: embedded\n", with: "  bootstrap_servers: a:1\n  bootstrap_servers: b:1\n"
        )
        let problem = try self.onlyProblem(yaml)
        #expect(problem.code == .duplicateKey)
        #expect(problem.path == "kafka.bootstrap_servers")
        #expect(problem.line == 3)
    }

    @Test func yamlSyntaxErrorHasItsLine() throws {
        let yaml = minimalYAML.replacingOccurrences(of: "    key_id: ABC123DEFG", with: "    key_id: [ABC123DEFG")
        let problem = try self.onlyProblem(yaml)
        #expect(problem.code == .yamlSyntax)
        #expect(problem.line != nil)
        #expect(problem.message.hasPrefix("not valid YAML"))
    }

    @Test func unreadableConfigurationFileIsOneProblem() throws {
        do {
            _ = try ConfigurationLoader(environment: [:]).load(file: "/nonexistent/pushbridge.yaml")
            Issue.record("loaded a file that does not exist")
        } catch {
            #expect(error.problems.map(\.code) == [.unreadableConfigurationFile])
            #expect(error.problems.first?.file == "/nonexistent/pushbridge.yaml")
        }
    }

    @Test func everyProblemIsReportedAtOnceInLineOrder() throws {
        let yaml = """
            kafka:
              bootstrap_servers: embedded
              commit_interval: soon
              max_inflight: 10
            apns:
              environment: staging
              auth:
                type: token
                key_file: /nonexistent/AuthKey.p8
                key_id: ABC123DEFG
                team_id: DEF123GHIJ
            routes:
              - name: greeting
                input_topic: greetings
                app: missing
                device_tokens: "{{token}}"
                topic: com.example.app
                priority: high
                payload: { aps: { alert: hi } }
            admin:
              listen: nowhere
            """
        let problems = self.files.problems(yaml)
        #expect(
            problems.map(\.path) == [
                "kafka.commit_interval", "kafka.max_inflight", "apns.environment", "apns.auth.key_file",
                "routes[0].app", "routes[0].priority", "admin.listen",
            ])
        #expect(problems.map(\.line) == [3, 4, 6, 9, 15, 18, 21])
        #expect(
            problems.map(\.code) == [
                .invalidDuration, .unknownKey, .invalidValue, .credentialFile, .unknownApp, .wrongType, .invalidValue,
            ])
    }

    @Test func problemsNeverContainSecretValues() throws {
        let yaml = minimalYAML.replacingOccurrences(
            of: "    type: token\n    key_file: ${KEY_FILE}\n    key_id: ABC123DEFG\n    team_id: DEF123GHIJ",
            with: """
                    type: certificate
                    p12_file: /nonexistent/push.p12
                    p12_password: [hunter2-inline]
                    p12_password_file: \(self.files.path("p12-password"))
                """
        ).replacingOccurrences(
            of: "  bootstrap_servers: embedded\n",
            with: "  bootstrap_servers: embedded\n  properties: { sasl.password: [hunter2-kafka] }\n"
        )
        let problems = self.files.problems(yaml, environment: ["SECRET": "hunter2-env"])
        #expect(problems.count >= 3)
        let text = problems.map(\.description).joined(separator: "\n")
        #expect(!text.contains("hunter2"))
        #expect(!text.contains("s3cret-p12-password"))
    }

    @Test func brokenTemplateIsReportedAtItsPayloadLeaf() throws {
        let yaml = minimalYAML.replacingOccurrences(of: "alert: \"{{text}}\"", with: "alert: \"Hi {{name\"")
        let problem = try self.onlyProblem(yaml)
        #expect(problem.code == .route)
        #expect(problem.path == "routes[0].payload.aps.alert")
        #expect(problem.line == 16)
        #expect(problem.message.contains("broken template"))
    }

    @Test func unknownPushTypeSuggestsTheClosestOne() throws {
        let yaml = minimalYAML.replacing(
            "    topic: com.example.app\n", with: "    topic: com.example.app\n    push_type: alrt\n"
        )
        let problem = try self.onlyProblem(yaml)
        #expect(problem.code == .route)
        #expect(problem.path == "routes[0].push_type")
        #expect(problem.line == 14)
        #expect(problem.message.contains("alrt"))
        #expect(problem.hint?.contains("alert") == true)
    }

    @Test func backgroundPushWithPriorityTenIsRejected() throws {
        let yaml = minimalYAML.replacingOccurrences(
            of: "    topic: com.example.app\n",
            with: "    topic: com.example.app\n    push_type: background\n    priority: 10\n"
        )
        let problem = try self.onlyProblem(yaml)
        #expect(problem.code == .route)
        #expect(problem.path == "routes[0].priority")
        #expect(problem.line == 15)
        #expect(problem.hint?.contains("5") == true)
    }

    @Test func routeCompilerFindingsInSeveralRoutesKeepTheirOwnLines() throws {
        let yaml =
            minimalYAML + """
                  - name: greeting
                    input_topic: greetings
                    device_tokens: fixed-token
                    topic: com.example.app
                    payload: { aps: { alert: hi } }
                    payload_from: notification

                """
        let problems = self.files.problems(yaml)
        #expect(problems.map(\.path) == ["routes[1].name", "routes[1].device_tokens", "routes[1].payload"])
        #expect(problems.map(\.line) == [17, 19, 21])
        #expect(problems.allSatisfy { $0.code == .route })
    }

    @Test func routeNamingAnAppWithProblemsGetsNoProblemOfItsOwn() throws {
        let yaml = minimalYAML.replacing(
            "routes:\n",
            with: """
                apps:
                  shop-sandbox:
                    auth: { type: token, key_file: /nonexistent/AuthKey.p8, key_id: ABC123DEFG, team_id: DEF123GHIJ }
                routes:

                """
        ).replacing("    input_topic: greetings\n", with: "    input_topic: greetings\n    app: shop-sandbox\n")
        let problem = try self.onlyProblem(yaml)
        #expect(problem.code == .credentialFile)
        #expect(problem.path == "apps.shop-sandbox.auth.key_file")
        #expect(problem.line == 11)
    }

    @Test func documentThatIsNotAMappingIsOneProblem() throws {
        let problem = try self.onlyProblem("- kafka\n- apns\n")
        #expect(problem.code == .wrongType)
        #expect(problem.path == "")
        #expect(problem.line == 1)
        #expect(problem.description == "test.yaml:1: expected a mapping (key: value lines), found a list")
    }

    @Test(arguments: ["http://127.0.0.1:2197", "127.0.0.1:2197", "https://", "https://host/3/device"])
    func endpointThatIsNotHTTPSHostAndPortIsRejected(endpoint: String) throws {
        let problem = try self.onlyProblem(minimalYAML.replacing("apns:\n", with: "apns:\n  endpoint: \(endpoint)\n"))
        #expect(problem.code == .invalidValue)
        #expect(problem.path == "apns.endpoint")
        #expect(problem.hint == "write https://host or https://host:port, e.g. https://127.0.0.1:2197")
    }

    @Test func tokenKeysUnderCertificateAuthAreRejected() throws {
        let yaml = minimalYAML.replacing("    type: token\n", with: "    type: certificate\n")
        let problems = self.files.problems(yaml)
        #expect(problems.map(\.path) == ["apns.auth.p12_file", "apns.auth.key_id", "apns.auth.team_id"])
        #expect(problems.map(\.line) == [4, 7, 8])
        #expect(problems.first?.hint == "or cert_file + key_file (PEM)")
        #expect(problems.last?.message == "does not apply to certificate auth")
    }

    @Test func maxBackoffShorterThanInitialBackoffIsRejected() throws {
        let yaml = minimalYAML.replacing(
            "apns:\n", with: "apns:\n  retry:\n    initial_backoff: 10s\n    max_backoff: 1s\n"
        )
        let problem = try self.onlyProblem(yaml)
        #expect(problem.path == "apns.retry.max_backoff")
        #expect(problem.line == 6)
        #expect(problem.message == "must not be shorter than initial_backoff (10s)")
    }
}
