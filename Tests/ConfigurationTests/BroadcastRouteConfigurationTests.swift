import Configuration
import Foundation
import Routing
import Testing

/// `channel_id` in a route: a Live Activity broadcast instead of pushes to device tokens (docs/configuration.md,
/// `routes`).
@Suite struct BroadcastRouteConfigurationTests {
    let files: TestFiles

    init() throws {
        self.files = try TestFiles()
    }

    /// ``minimalYAML`` with its route's `device_tokens` line replaced by `lines` (route keys, indented by four).
    func yaml(route lines: String, apns: String = "") -> String {
        minimalYAML
            .replacingOccurrences(of: "    device_tokens: \"{{token}}\"\n", with: lines)
            .replacingOccurrences(of: "apns:\n", with: "apns:\n" + apns)
    }

    @Test("a route with channel_id and push_type liveactivity loads as a broadcast route")
    func loads() throws {
        let yaml = self.yaml(route: "    channel_id: \"{{match.channel}}\"\n    push_type: liveactivity\n")
        let route = try #require(try self.files.load(yaml).configuration.routes.first)
        #expect(route.channelID == "{{match.channel}}")
        #expect(route.deviceTokens == "")
    }

    @Test(
        "mistakes name their key, the line and the fix",
        arguments: [
            (
                "    channel_id: \"{{match.channel}}\"\n", "routes[0].push_type",
                "set `push_type: liveactivity`"
            ),
            (
                "    channel_id: \"{{match.channel}}\"\n    push_type: alert\n", "routes[0].push_type",
                "must use push_type liveactivity, not alert"
            ),
            (
                "    device_tokens: \"{{token}}\"\n    channel_id: \"{{c}}\"\n    push_type: liveactivity\n",
                "routes[0].channel_id", "keep `device_tokens` or `channel_id`"
            ),
            (
                "    channel_id: \"{{c}}\"\n    push_type: liveactivity\n    collapse_id: x\n",
                "routes[0].collapse_id", "no apns-collapse-id"
            ),
            ("    channel_id: \"\"\n    push_type: liveactivity\n", "routes[0].channel_id", "channel_id is empty"),
            ("    channel_id: [a]\n    push_type: liveactivity\n", "routes[0].channel_id", "string"),
            (
                "    channel_id: \"not base64!\"\n    push_type: liveactivity\n", "routes[0].channel_id",
                "pushbridge channels create"
            ),
            ("    push_type: liveactivity\n", "routes[0].device_tokens", "channel_id instead"),
        ])
    func mistakes(lines: String, path: String, fix: String) throws {
        let problems = self.files.problems(self.yaml(route: lines))
        #expect(problems.map(\.path) == [path], "\(problems)")
        #expect(problems.first?.line != nil, "\(problems)")
        let text = problems.map { "\($0.message) \($0.hint ?? "")" }.joined()
        #expect(text.contains(fix), "\(problems)")
    }

    @Test("a broadcast route through a binary app is an error naming the fix")
    func binaryApp() throws {
        let yaml = minimalYAML.replacingOccurrences(
            of: "routes:\n",
            with: """
                apps:
                  legacy:
                    protocol: binary
                    auth:
                      type: certificate
                      cert_file: ${CA_FILE}
                      key_file: ${KEY_FILE}
                    binary: { feedback: { enabled: false } }
                routes:

                """
        ).replacingOccurrences(
            of: "    device_tokens: \"{{token}}\"\n",
            with: "    app: legacy\n    channel_id: \"{{c}}\"\n    push_type: liveactivity\n")
        let problems = self.files.problems(yaml)
        #expect(problems.map(\.path) == ["routes[0].channel_id"], "\(problems)")
        #expect(problems.first?.hint?.contains("protocol: http2") == true, "\(problems)")
    }
}
