import Configuration
import Foundation
import Testing

/// Configuration problems name the key, never the value of a secret key (docs/configuration.md, "Secrets in
/// errors"). Every error path that a secret value can reach is tried with a secret-looking value, and the
/// whole printed problem is searched for any part of it.
@Suite struct ConfigurationSecretsTests {
    let files: TestFiles

    init() throws {
        self.files = try TestFiles()
    }

    /// Parts of the secret values below; none may appear in any problem.
    static let secretParts = ["Hunter2", "Zq9xWv", "ZQ9XWV", "pa55"]

    /// The printed problems of `yaml`, after checking there is at least one and that none shows a secret.
    @discardableResult
    func problemsShowNoSecret(_ yaml: String, sourceLocation: SourceLocation = #_sourceLocation) -> String {
        let problems = self.files.problems(yaml)
        #expect(!problems.isEmpty, "expected a problem", sourceLocation: sourceLocation)
        let text = problems.map(\.description).joined(separator: "\n")
        for part in Self.secretParts {
            #expect(!text.contains(part), "a problem shows part of a secret: \(text)", sourceLocation: sourceLocation)
        }
        return text
    }

    func withProperties(_ section: String, _ lines: String) -> String {
        minimalYAML.replacingOccurrences(
            of: "  bootstrap_servers: embedded\n", with: "  bootstrap_servers: embedded\n  \(section):\n\(lines)")
    }

    static let secretProperties = [
        ("properties", "sasl.password"), ("properties", "ssl.key.password"),
        ("consumer_properties", "ssl.keystore.password"), ("producer_properties", "sasl.oauthbearer.client.secret"),
        ("properties", "sasl.jaas.config"), ("properties", "ssl.key.pem"),
    ]

    @Test(arguments: Self.secretProperties)
    func malformedReferenceInASecretPropertyIsLocatedNotQuoted(_ section: String, _ key: String) throws {
        let text = self.problemsShowNoSecret(self.withProperties(section, "    \(key): \"Hunter2${Zq9xWv-pa55\"\n"))
        #expect(text.contains("kafka.\(section).\(key): malformed variable reference at character 8 of the value"))
    }

    @Test(arguments: Self.secretProperties)
    func unsetVariableInsideASecretIsNotNamed(_ section: String, _ key: String) throws {
        let text = self.problemsShowNoSecret(self.withProperties(section, "    \(key): \"Hunter2${ZQ9XWV}\"\n"))
        #expect(text.contains("kafka.\(section).\(key): the value refers to an environment variable that is not set"))
    }

    @Test func secretThatIsOneReferenceNamesTheVariable() throws {
        let yaml = self.withProperties("properties", "    sasl.password: ${KAFKA_PASSWORD}\n")
        let problem = try #require(self.files.problems(yaml).first)
        #expect(problem.message == "environment variable KAFKA_PASSWORD is not set")
    }

    @Test func secretPropertyOfTheWrongTypeShowsOnlyTheType() throws {
        let text = self.problemsShowNoSecret(self.withProperties("properties", "    sasl.password: [Hunter2Zq9xWv]\n"))
        #expect(text.contains("kafka.properties.sasl.password: expected a string, number or boolean, found a list"))
        self.problemsShowNoSecret(self.withProperties("properties", "    sasl.password: {Hunter2: Zq9xWv}\n"))
    }

    @Test func secretPropertyGivenTwiceShowsNeitherValue() throws {
        self.problemsShowNoSecret(
            self.withProperties("properties", "    sasl.password: Hunter2Zq9xWv\n    sasl.password: pa55Hunter2\n"))
        try self.files.write("kafka-password", "Hunter2Zq9xWv\n")
        self.problemsShowNoSecret(
            self.withProperties(
                "properties",
                "    sasl.password: pa55Hunter2\n    sasl.password_file: \(self.files.path("kafka-password"))\n"))
    }

    @Test func yamlSyntaxErrorNearASecretDoesNotQuoteIt() throws {
        self.problemsShowNoSecret(self.withProperties("properties", "    sasl.password: \"Hunter2Zq9xWv\n"))
        self.problemsShowNoSecret(self.withProperties("properties", "    sasl.password: 'Hunter2'Zq9xWv'\n"))
    }

    /// Certificate auth whose `p12_password` line is `password`.
    func p12YAML(_ password: String) -> String {
        minimalYAML.replacingOccurrences(
            of: """
                    type: token
                    key_file: ${KEY_FILE}
                    key_id: ABC123DEFG
                    team_id: DEF123GHIJ

                """,
            with: """
                    type: certificate
                    p12_file: \(self.files.path("push.p12"))
                \(password)

                """)
    }

    @Test func p12PasswordIsNeverShown() throws {
        let malformed = self.problemsShowNoSecret(self.p12YAML("    p12_password: \"Hunter2${Zq9xWv\""))
        #expect(malformed.contains("apns.auth.p12_password: malformed variable reference at character 8"))
        self.problemsShowNoSecret(self.p12YAML("    p12_password: \"Hunter2${ZQ9XWV}\""))
        self.problemsShowNoSecret(self.p12YAML("    p12_password: [Hunter2Zq9xWv]"))
        let unknown = self.problemsShowNoSecret(self.p12YAML("    p12_pasword: Hunter2Zq9xWv"))
        #expect(unknown.contains("apns.auth.p12_pasword: unknown key (did you mean p12_password?)"))
        self.problemsShowNoSecret(
            self.p12YAML("    p12_password: Hunter2Zq9xWv\n    p12_password_file: \(self.files.path("p12-password"))"))
    }

    @Test func secretFileContentsAreNeverShown() throws {
        try self.files.write("not-a-key.p8", "Hunter2Zq9xWv\n")
        let yaml = minimalYAML.replacingOccurrences(of: "${KEY_FILE}", with: self.files.path("not-a-key.p8"))
        let text = self.problemsShowNoSecret(yaml)
        #expect(text.contains("not-a-key.p8 is not an APNs auth key"))
    }

    @Test func unknownKeyWithASecretLookingValueShowsOnlyTheKey() throws {
        let yaml = minimalYAML.replacingOccurrences(of: "kafka:\n", with: "kafka:\n  password: Hunter2Zq9xWv\n")
        let text = self.problemsShowNoSecret(yaml)
        #expect(text.contains("kafka.password: unknown key"))
    }

    @Test func nonSecretKeysStillQuoteTheirValueForTheFix() throws {
        let malformed = minimalYAML.replacingOccurrences(of: "kafka:\n", with: "kafka:\n  group_id: \"${GROUP\"\n")
        let problem = try #require(self.files.problems(malformed).first)
        #expect(problem.message == "malformed variable reference ${GROUP")
        let environment = minimalYAML.replacingOccurrences(
            of: "apns:\n", with: "apns:\n  environment: \"prod\\r\\nx\"\n")
        let quoted = try #require(self.files.problems(environment).first)
        #expect(quoted.message == "\"prod\\u{d}\\u{a}x\" is not allowed", "control characters are escaped")
    }

    @Test func aValueFromTheEnvironmentIsShownAsItsReferenceInAnyKeysProblem() throws {
        let inKafka = minimalYAML.replacingOccurrences(
            of: "  bootstrap_servers: embedded\n", with: "  bootstrap_servers: embedded\n  max_in_flight: ${LEAKED}\n")
        let kafka = self.files.problems(inKafka, environment: ["LEAKED": "Hunter2Zq9xWv"])
        #expect(kafka.count == 1)
        #expect(kafka.first.map { !$0.description.contains("Hunter2") } == true, "\(kafka)")
        #expect(kafka.first?.description.contains("${LEAKED}") == true, "\(kafka)")

        let inRoute = minimalYAML.replacingOccurrences(
            of: "    topic: com.example.app\n", with: "    topic: com.example.app\n    expiration: \"x${LEAKED}\"\n")
        let route = self.files.problems(inRoute, environment: ["LEAKED": "Hunter2Zq9xWv"])
        #expect(!route.isEmpty)
        #expect(route.allSatisfy { !$0.description.contains("Hunter2") }, "\(route)")
        #expect(route.contains { $0.description.contains("x${LEAKED}") }, "\(route)")
    }
}
