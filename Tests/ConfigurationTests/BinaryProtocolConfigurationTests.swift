import BinaryProvider
import Configuration
import Foundation
import Testing

/// `protocol: binary` and its `binary:` section (docs/configuration.md, docs/binary-protocol.md).
@Suite struct BinaryProtocolConfigurationTests {
    let files: TestFiles

    init() throws {
        self.files = try TestFiles()
    }

    /// ``minimalYAML`` with its `apns:` block's lines replaced by `apns` (indented by two spaces).
    func yaml(apns: String) -> String {
        let lines = minimalYAML.split(separator: "\n", omittingEmptySubsequences: false)
        let start = lines.firstIndex(of: "apns:")! + 1
        let end = lines.firstIndex(of: "routes:")!
        return (lines[..<start] + [Substring(apns)] + lines[end...]).joined(separator: "\n")
    }

    let certificateAuth = """
          auth:
            type: certificate
            cert_file: ${CA_FILE}
            key_file: ${KEY_FILE}
        """

    @Test("protocol: binary reads its section; its endpoint is the gateway, host:port")
    func binarySection() throws {
        let yaml = self.yaml(
            apns: """
                  protocol: binary
                  environment: sandbox
                \(self.certificateAuth)
                  connections: 3
                  endpoint: 127.0.0.1:2195
                  binary:
                    format: enhanced
                    payload_limit: 256
                    quiet_window: 250ms
                    max_unconfirmed: 500
                    max_resends_without_error: 1
                """)
        let apns = try self.files.load(yaml, checksFiles: false).configuration.apns
        #expect(apns.providerProtocol == .binary)
        #expect(apns.connections == 3)
        #expect(apns.binary.gateway == APNSSettings.Endpoint(host: "127.0.0.1", port: 2195))
        #expect(apns.binary.format == .enhanced)
        #expect(apns.binary.payloadLimitBytes == 256)
        #expect(apns.binary.quietWindow == .milliseconds(250))
        #expect(apns.binary.maxUnconfirmed == 500)
        #expect(apns.binary.maxResendsWithoutError == 1)
    }

    @Test("without a binary section: framed, 2048 bytes, 1 s, Apple's historical gateway of the environment")
    func defaults() throws {
        let yaml = self.yaml(apns: "  protocol: binary\n  environment: sandbox\n" + self.certificateAuth)
        let apns = try self.files.load(yaml, checksFiles: false).configuration.apns
        #expect(apns.binary.gateway == nil)
        #expect(apns.binary.format == .framed)
        #expect(apns.binary.payloadLimitBytes == 2048)
        #expect(apns.binary.quietWindow == .seconds(1))
        #expect(
            BinaryProtocolSettings.appleGateway(apns.environment)
                == APNSSettings.Endpoint(host: "gateway.sandbox.push.apple.com", port: 2195))
        let http2 = try self.files.load(minimalYAML).configuration.apns
        #expect(http2.providerProtocol == .http2)
    }

    /// Apple's limit for commands 0 and 1 is 256 bytes; before issue 29 they took the framed format's 2048.
    @Test(
        "the payload limit follows the format (framed 2048, enhanced and simple 256) unless payload_limit says",
        arguments: [("framed", nil, 2048), ("enhanced", nil, 256), ("simple", nil, 256), ("enhanced", 2048, 2048)]
            as [(String, Int?, Int)])
    func payloadLimitByFormat(format: String, limit: Int?, expected: Int) throws {
        let limitLine = limit.map { "\n    payload_limit: \($0)" } ?? ""
        let yaml = self.yaml(
            apns: "  protocol: binary\n" + self.certificateAuth + "\n  binary:\n    format: \(format)" + limitLine
                + "\n")
        let apns = try self.files.load(yaml, checksFiles: false).configuration.apns
        #expect(apns.binary.payloadLimitBytes == expected)
    }

    @Test("token auth with protocol: binary is an error at apns.auth naming the fix")
    func tokenAuth() throws {
        let yaml = self.yaml(
            apns: """
                  protocol: binary
                  auth:
                    type: token
                    key_file: ${KEY_FILE}
                    key_id: ABC123DEFG
                    team_id: DEF123GHIJ
                """)
        let problems = self.files.problems(yaml)
        let problem = try #require(problems.first)
        #expect(problems.count == 1, "\(problems)")
        #expect(problem.path == "apns.auth")
        #expect(problem.message.contains("certificate authentication only"))
        #expect(problem.hint?.contains("type: certificate") == true)
    }

    @Test(
        "mistakes name their key: a URL as the gateway, a binary section without the protocol, a bad gateway, format, limit",
        arguments: [
            ("  protocol: binary\n  endpoint: https://127.0.0.1:2197\n", "apns.endpoint"),
            ("  binary:\n    format: framed\n", "apns.binary"),
            ("  protocol: binary\n  endpoint: 127.0.0.1\n", "apns.endpoint"),
            ("  protocol: binary\n  endpoint: 127.0.0.1:70000\n", "apns.endpoint"),
            ("  protocol: binary\n  binary:\n    gateway: 127.0.0.1:2195\n", "apns.binary.gateway"),
            ("  protocol: binary\n  binary:\n    format: frames\n", "apns.binary.format"),
            ("  protocol: binary\n  binary:\n    payload_limit: 4096\n", "apns.binary.payload_limit"),
            ("  protocol: binary\n  binary:\n    quiet_window: 0s\n", "apns.binary.quiet_window"),
            ("  protocol: smtp\n", "apns.protocol"),
        ])
    func mistakes(lines: String, path: String) throws {
        let yaml = self.yaml(apns: lines + self.certificateAuth)
        let problems = self.files.problems(yaml)
        #expect(problems.map(\.path) == [path], "\(problems)")
    }

    // MARK: binary.feedback

    @Test("binary.feedback reads enabled, endpoint, interval, timeout and topic")
    func feedbackSection() throws {
        let yaml = self.yaml(
            apns: """
                  protocol: binary
                \(self.certificateAuth)
                  binary:
                    feedback:
                      enabled: true
                      endpoint: 127.0.0.1:2196
                      interval: 10m
                      timeout: 5s
                      topic: com.example.certificate
                """)
        let configuration = try self.files.load(yaml, checksFiles: false).configuration
        let feedback = configuration.apns.binary.feedback
        #expect(feedback.enabled)
        #expect(feedback.endpoint == APNSSettings.Endpoint(host: "127.0.0.1", port: 2196))
        #expect(feedback.interval == .seconds(600))
        #expect(feedback.timeout == .seconds(5))
        #expect(configuration.feedbackTopic(app: nil) == "com.example.certificate")
        #expect(configuration.feedbackApps.map(\.name) == [nil])
    }

    @Test("without a feedback section: on, every hour, Apple's feedback service of the environment, the routes' topic")
    func feedbackDefaults() throws {
        let yaml = self.yaml(apns: "  protocol: binary\n  environment: sandbox\n" + self.certificateAuth)
        let configuration = try self.files.load(yaml, checksFiles: false).configuration
        let feedback = configuration.apns.binary.feedback
        #expect(feedback.enabled)
        #expect(feedback.endpoint == nil)
        #expect(feedback.interval == .seconds(3600))
        #expect(feedback.timeout == .seconds(30))
        #expect(
            FeedbackSettings.appleFeedback(configuration.apns.environment)
                == APNSSettings.Endpoint(host: "feedback.sandbox.push.apple.com", port: 2196))
        #expect(FeedbackSettings.appleFeedback(.production).host == "feedback.push.apple.com")
        #expect(configuration.feedbackTopic(app: nil) == "com.example.app", "the one topic the routes send to")
        let http2 = try self.files.load(minimalYAML).configuration
        #expect(http2.feedbackApps.isEmpty, "HTTP/2 apps have no feedback service")
    }

    @Test("feedback: { enabled: false } turns the poller off")
    func feedbackOff() throws {
        let yaml = self.yaml(
            apns: "  protocol: binary\n" + self.certificateAuth + "\n  binary:\n    feedback: { enabled: false }")
        let configuration = try self.files.load(yaml, checksFiles: false).configuration
        #expect(!configuration.apns.binary.feedback.enabled)
        #expect(configuration.feedbackApps.isEmpty)
    }

    @Test(
        "feedback mistakes name their key: a URL, no port, an interval under a second or over a week, a flag, a typo",
        arguments: [
            ("endpoint: https://127.0.0.1:2196", "apns.binary.feedback.endpoint"),
            ("endpoint: 127.0.0.1", "apns.binary.feedback.endpoint"),
            ("interval: 500ms", "apns.binary.feedback.interval"),
            ("interval: 8d", "apns.binary.feedback.interval"),
            ("interval: 200h", "apns.binary.feedback.interval"),
            ("interval: 60", "apns.binary.feedback.interval"),
            ("timeout: 0s", "apns.binary.feedback.timeout"),
            ("enabled: maybe", "apns.binary.feedback.enabled"),
            ("topic: \"\"", "apns.binary.feedback.topic"),
            ("intervall: 1h", "apns.binary.feedback.intervall"),
        ])
    func feedbackMistakes(line: String, path: String) throws {
        let yaml = self.yaml(
            apns: "  protocol: binary\n" + self.certificateAuth + "\n  binary:\n    feedback:\n      \(line)")
        let problems = self.files.problems(yaml)
        #expect(problems.map(\.path) == [path], "\(problems)")
        #expect(problems.first?.line != nil)
    }

    @Test("an interval that is too short says the bound")
    func feedbackIntervalBound() throws {
        let yaml = self.yaml(
            apns: "  protocol: binary\n" + self.certificateAuth + "\n  binary:\n    feedback: { interval: 10ms }")
        let problem = try #require(self.files.problems(yaml).first)
        #expect(problem.message.contains("at least 1s"), "\(problem)")
    }

    @Test("a feedback app whose records' topic is unknown is an error naming binary.feedback.topic and the fix")
    func feedbackTopicUnknown() throws {
        let app = """
            apps:
              legacy:
                protocol: binary
                auth:
                  type: certificate
                  cert_file: ${CA_FILE}
                  key_file: ${KEY_FILE}
            """
        let withApp = minimalYAML.replacingOccurrences(of: "routes:", with: app + "\nroutes:")
        let problems = self.files.problems(withApp)
        let problem = try #require(problems.first)
        #expect(problems.count == 1, "\(problems)")
        #expect(problem.path == "apps.legacy.binary.feedback.topic")
        #expect(problem.code == .missingKey)
        #expect(problem.message.contains("no route sends through this app"))
        #expect(problem.hint?.contains("enabled: false") == true)
        #expect(problem.line == 10, "the app's line, where the key belongs")

        let routes = """
              - name: other
                input_topic: others
                app: legacy
                device_tokens: "{{token}}"
                topic: com.example.other
                payload: { aps: { alert: hi } }
              - name: third
                input_topic: others
                app: legacy
                device_tokens: "{{token}}"
                topic: com.example.third
                payload: { aps: { alert: hi } }
            """
        let ambiguous = self.files.problems(withApp + routes)
        #expect(ambiguous.map(\.path) == ["apps.legacy.binary.feedback.topic"])
        #expect(ambiguous.first?.message.contains("com.example.other, com.example.third") == true)

        let named = withApp.replacingOccurrences(
            of: "      key_file: ${KEY_FILE}",
            with: "      key_file: ${KEY_FILE}\n    binary: { feedback: { topic: com.example.legacy } }")
        let configuration = try self.files.load(named + routes).configuration
        #expect(configuration.feedbackTopic(app: "legacy") == "com.example.legacy")
        #expect(configuration.feedbackApps.map(\.name) == ["legacy"])
        let off = withApp.replacingOccurrences(
            of: "      key_file: ${KEY_FILE}",
            with: "      key_file: ${KEY_FILE}\n    binary: { feedback: { enabled: false } }")
        #expect(self.files.problems(off) == [])
    }
}
