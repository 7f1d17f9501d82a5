import Configuration
import EgressProxy
import Foundation
import Testing

/// `proxy` / `proxy_file` of an `apns`-shaped block, and the environment's `HTTPS_PROXY` / `NO_PROXY`
/// (docs/configuration.md, "apns.proxy").
@Suite struct ProxyConfigurationTests {
    let files: TestFiles

    init() throws {
        self.files = try TestFiles()
    }

    /// ``minimalYAML`` with `lines` (indented by two spaces) added to its `apns:` block.
    func yaml(apns lines: String) -> String {
        minimalYAML.replacingOccurrences(of: "apns:\n", with: "apns:\n" + lines)
    }

    @Test("proxy: a URL with credentials applies to every host of the block, loopback included")
    func configured() throws {
        let apns = try self.files.load(
            self.yaml(apns: "  proxy: http://alice:${PROXY_PASSWORD}@proxy.internal:3128\n"),
            environment: ["PROXY_PASSWORD": "hunter2"]
        ).configuration.apns
        let expected = EgressProxy(
            host: "proxy.internal", port: 3128, credentials: ProxyCredentials(username: "alice", password: "hunter2"))
        #expect(apns.proxy == .configured(expected))
        #expect(apns.proxy.proxy(forHost: "api.push.apple.com") == expected)
        #expect(apns.proxy.proxy(forHost: "127.0.0.1") == expected)
    }

    @Test("proxy_file holds the URL (a mounted secret), one trailing newline removed")
    func fromFile() throws {
        try self.files.write("proxy-url", "http://alice:hunter2@proxy.internal:3128\n")
        let apns = try self.files.load(self.yaml(apns: "  proxy_file: \(self.files.path("proxy-url"))\n"))
            .configuration.apns
        #expect(apns.proxy.proxy(forHost: "api.push.apple.com")?.credentials?.password == "hunter2")
    }

    @Test("without proxy, the environment's HTTPS_PROXY applies, except NO_PROXY's hosts and loopback")
    func environment() throws {
        let apns = try self.files.load(
            minimalYAML, environment: ["HTTPS_PROXY": "proxy.internal:3128", "NO_PROXY": ".internal,10.0.0.0/8"]
        ).configuration.apns
        let proxy = EgressProxy(host: "proxy.internal", port: 3128)
        #expect(apns.proxy == .environment(proxy, variable: "HTTPS_PROXY", bypass: NoProxyList(".internal,10.0.0.0/8")))
        #expect(apns.proxy.proxy(forHost: "api.push.apple.com") == proxy)
        #expect(apns.proxy.proxy(forHost: "gateway.internal") == nil)
        #expect(apns.proxy.proxy(forHost: "127.0.0.1") == nil)
    }

    @Test("explicit configuration wins: proxy: none ignores HTTPS_PROXY, and a URL replaces it")
    func precedence() throws {
        let environment = ["https_proxy": "http://from-environment:3128"]
        let none = try self.files.load(self.yaml(apns: "  proxy: none\n"), environment: environment)
        #expect(none.configuration.apns.proxy == .direct)
        let url = try self.files.load(self.yaml(apns: "  proxy: http://from-config:8080\n"), environment: environment)
        #expect(url.configuration.apns.proxy == .configured(EgressProxy(host: "from-config", port: 8080)))
        let empty = try self.files.load(self.yaml(apns: "  proxy: ${UNSET_PROXY:-}\n"), environment: environment)
        #expect(empty.configuration.apns.proxy.proxy(forHost: "api.push.apple.com")?.host == "from-environment")
    }

    @Test("each app has its own proxy; one without the key takes the environment's, not the apns block's")
    func perApp() throws {
        let yaml = self.yaml(apns: "  proxy: http://default-proxy:3128\n").replacingOccurrences(
            of: "routes:\n",
            with: """
                apps:
                  direct:
                    proxy: none
                    auth: { type: token, key_file: "${KEY_FILE}", key_id: ABC123DEFG, team_id: DEF123GHIJ }
                  other:
                    proxy: http://other-proxy:8080
                    auth: { type: token, key_file: "${KEY_FILE}", key_id: ABC123DEFG, team_id: DEF123GHIJ }
                  plain:
                    auth: { type: token, key_file: "${KEY_FILE}", key_id: ABC123DEFG, team_id: DEF123GHIJ }
                routes:

                """)
        let configuration = try self.files.load(yaml).configuration
        #expect(configuration.apns.proxy == .configured(EgressProxy(host: "default-proxy", port: 3128)))
        #expect(configuration.apps["direct"]?.proxy == .direct)
        #expect(configuration.apps["other"]?.proxy == .configured(EgressProxy(host: "other-proxy", port: 8080)))
        #expect(configuration.apps["plain"]?.proxy == .direct, "no HTTPS_PROXY in this environment")
    }

    @Test(
        "an unusable proxy is a problem naming the key and the fix, never quoting the URL",
        arguments: [
            ("https://alice:hunter2@proxy:3128", "https:// proxy"),
            ("socks5://alice:hunter2@proxy:1080", "scheme \"socks5\""),
            ("alice:hunter2@proxy:3128", "has no scheme"),
            ("http://alice:hunter2@proxy", "has no port"),
            ("http://alice:hunter2@proxy:0", "not a number from 1 to 65535"),
        ])
    func invalid(url: String, problem: String) {
        let problems = self.files.problems(self.yaml(apns: "  proxy: \"\(url)\"\n"))
        #expect(problems.count == 1)
        let text = problems.map(\.description).joined()
        #expect(problems.first?.path == "apns.proxy")
        #expect(text.contains(problem), "\(text)")
        #expect(text.contains("e.g. http://proxy.internal:3128"), "the fix: \(text)")
        #expect(!text.contains("hunter2"), "\(text)")
    }

    @Test("proxy and proxy_file together, and a missing proxy_file, are problems at the key")
    func fileProblems() {
        try? self.files.write("proxy-url", "http://proxy:3128\n")
        let both = self.files.problems(
            self.yaml(apns: "  proxy: http://proxy:3128\n  proxy_file: \(self.files.path("proxy-url"))\n"))
        #expect(both.map(\.path) == ["apns.proxy_file"])
        #expect(both.first?.message.contains("not both") == true)
        let missing = self.files.problems(self.yaml(apns: "  proxy_file: \(self.files.path("nope"))\n"))
        #expect(missing.map(\.path) == ["apns.proxy_file"])
        try? self.files.write("bad-proxy-url", "http://alice:hunter2@proxy\n")
        let bad = self.files.problems(self.yaml(apns: "  proxy_file: \(self.files.path("bad-proxy-url"))\n"))
        #expect(bad.map(\.path) == ["apns.proxy_file"])
        #expect(bad.first?.message.contains("has no port") == true)
        #expect(!bad.map(\.description).joined().contains("hunter2"))
    }

    @Test("an unusable HTTPS_PROXY is one problem naming the variable and how out, never its value")
    func invalidEnvironment() {
        let yaml = minimalYAML.replacingOccurrences(
            of: "routes:\n",
            with: """
                apps:
                  other:
                    auth: { type: token, key_file: "${KEY_FILE}", key_id: ABC123DEFG, team_id: DEF123GHIJ }
                routes:

                """)
        let problems = self.files.problems(yaml, environment: ["HTTPS_PROXY": "http://alice:hunter2@proxy"])
        #expect(problems.count == 1, "reported once, not per block: \(problems)")
        let text = problems.map(\.description).joined()
        #expect(text.contains("HTTPS_PROXY has no port"), "\(text)")
        #expect(text.contains("proxy: none") || text.contains("none to connect directly"), "\(text)")
        #expect(!text.contains("hunter2"), "\(text)")
        // Read only for a block without proxy: with proxy: none everywhere it does not matter.
        #expect(self.files.problems(self.yaml(apns: "  proxy: none\n"), environment: ["HTTPS_PROXY": "bad"]).isEmpty)
    }
}
