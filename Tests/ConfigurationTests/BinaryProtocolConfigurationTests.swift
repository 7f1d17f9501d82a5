import BinaryProvider
import Configuration
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

    @Test("protocol: binary reads its section; the gateway is host:port")
    func binarySection() throws {
        let yaml = self.yaml(
            apns: """
                  protocol: binary
                  environment: sandbox
                \(self.certificateAuth)
                  connections: 3
                  binary:
                    gateway: 127.0.0.1:2195
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
        "mistakes name their key: an HTTP/2 endpoint, a binary section without the protocol, a bad gateway, format, limit",
        arguments: [
            ("  protocol: binary\n  endpoint: https://127.0.0.1:2197\n", "apns.endpoint"),
            ("  binary:\n    format: framed\n", "apns.binary"),
            ("  protocol: binary\n  binary:\n    gateway: https://127.0.0.1:2195\n", "apns.binary.gateway"),
            ("  protocol: binary\n  binary:\n    gateway: 127.0.0.1\n", "apns.binary.gateway"),
            ("  protocol: binary\n  binary:\n    gateway: 127.0.0.1:70000\n", "apns.binary.gateway"),
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
}
