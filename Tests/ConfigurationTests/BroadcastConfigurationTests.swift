import Configuration
import Foundation
import Testing

/// `broadcast:` of an `apns`-shaped block: where `pushbridge channels` manages broadcast channels
/// (docs/configuration.md, "apns.broadcast").
@Suite struct BroadcastConfigurationTests {
    let files: TestFiles

    init() throws {
        self.files = try TestFiles()
    }

    /// ``minimalYAML`` with `lines` (indented by two spaces) added to its `apns:` block.
    func yaml(apns lines: String) -> String {
        minimalYAML.replacingOccurrences(of: "apns:\n", with: "apns:\n" + lines)
    }

    @Test("without broadcast: Apple's management host of the environment, not the endpoint")
    func defaults() throws {
        let production = try self.files.load(minimalYAML).configuration.apns
        #expect(production.broadcast.managementEndpoint == nil)
        #expect(
            production.effectiveManagementEndpoint
                == APNSSettings.Endpoint(host: "api-manage-broadcast.push.apple.com", port: 2196))
        let sandbox = try self.files.load(
            self.yaml(apns: "  environment: sandbox\n  endpoint: https://127.0.0.1:2197\n")
        ).configuration.apns
        #expect(
            sandbox.effectiveManagementEndpoint
                == APNSSettings.Endpoint(host: "api-manage-broadcast.sandbox.push.apple.com", port: 2195))
    }

    @Test(
        "management_endpoint is host:port or https://host[:port]",
        arguments: [
            ("127.0.0.1:2197", APNSSettings.Endpoint(host: "127.0.0.1", port: 2197)),
            ("https://127.0.0.1:2197", APNSSettings.Endpoint(host: "127.0.0.1", port: 2197)),
            ("https://channels.internal", APNSSettings.Endpoint(host: "channels.internal", port: 443)),
            ("[::1]:2195", APNSSettings.Endpoint(host: "::1", port: 2195)),
        ])
    func managementEndpoint(text: String, expected: APNSSettings.Endpoint) throws {
        let yaml = self.yaml(apns: "  broadcast:\n    management_endpoint: \"\(text)\"\n")
        let apns = try self.files.load(yaml).configuration.apns
        #expect(apns.broadcast.managementEndpoint == expected)
        #expect(apns.effectiveManagementEndpoint == expected)
    }

    @Test("an app's broadcast section is its own")
    func perApp() throws {
        let yaml =
            minimalYAML.replacingOccurrences(
                of: "routes:\n",
                with: """
                    apps:
                      live:
                        environment: sandbox
                        broadcast: { management_endpoint: "127.0.0.1:2197" }
                        auth:
                          type: token
                          key_file: ${KEY_FILE}
                          key_id: ABC123DEFG
                          team_id: DEF123GHIJ
                    routes:

                    """)
        let configuration = try self.files.load(yaml).configuration
        #expect(
            configuration.apps["live"]?.effectiveManagementEndpoint
                == APNSSettings.Endpoint(host: "127.0.0.1", port: 2197))
        #expect(configuration.apns.broadcast.managementEndpoint == nil)
    }

    @Test(
        "mistakes name their key and the fix",
        arguments: [
            ("  broadcast:\n    management_endpoint: 127.0.0.1\n", "apns.broadcast.management_endpoint", "host:port"),
            (
                "  broadcast:\n    management_endpoint: http://127.0.0.1:2197\n", "apns.broadcast.management_endpoint",
                "host:port"
            ),
            (
                "  broadcast:\n    management_endpoint: 127.0.0.1:99999\n", "apns.broadcast.management_endpoint",
                "host:port"
            ),
            (
                "  broadcast:\n    management_endpont: 127.0.0.1:2197\n", "apns.broadcast.management_endpont",
                "management_endpoint"
            ),
            ("  broadcast: 127.0.0.1:2197\n", "apns.broadcast", "mapping"),
        ])
    func mistakes(lines: String, path: String, fix: String) throws {
        let problems = self.files.problems(self.yaml(apns: lines))
        #expect(problems.map(\.path) == [path], "\(problems)")
        let text = problems.map { "\($0.message) \($0.hint ?? "")" }.joined()
        #expect(text.contains(fix), "\(problems)")
    }

    @Test("broadcast with protocol: binary is an error naming the fix")
    func binary() throws {
        let yaml = self.yaml(
            apns: """
                  protocol: binary
                  broadcast:
                    management_endpoint: 127.0.0.1:2197

                """
        ).replacingOccurrences(
            of: """
                  auth:
                    type: token
                    key_file: ${KEY_FILE}
                    key_id: ABC123DEFG
                    team_id: DEF123GHIJ
                """,
            with: """
                  auth:
                    type: certificate
                    cert_file: ${CA_FILE}
                    key_file: ${KEY_FILE}
                """)
        let problems = self.files.problems(yaml)
        #expect(problems.map(\.path).contains("apns.broadcast"), "\(problems)")
        #expect(problems.contains { $0.hint?.contains("protocol: http2") == true }, "\(problems)")
    }
}
