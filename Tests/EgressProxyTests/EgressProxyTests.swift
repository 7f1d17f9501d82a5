import EgressProxy
import Foundation
import Testing

@Suite("Proxy URLs: http://[user:password@]host:port")
struct ProxyURLTests {
    @Test("a URL with credentials gives host, port, and percent-decoded user and password")
    func credentials() throws {
        let proxy = try EgressProxy(url: "http://push%40corp:p%3Ass%40w0rd@proxy.internal:3128/")
        #expect(proxy.host == "proxy.internal")
        #expect(proxy.port == 3128)
        #expect(proxy.credentials?.username == "push@corp")
        #expect(proxy.credentials?.password == "p:ss@w0rd")
    }

    @Test("an IPv6 proxy is written in brackets and kept without them")
    func ipv6() throws {
        let proxy = try EgressProxy(url: "HTTP://[::1]:8080")
        #expect(proxy.host == "::1")
        #expect(proxy.port == 8080)
        #expect(proxy.credentials == nil)
        #expect(proxy.description == "http://[::1]:8080")
    }

    @Test("the text of a proxy, and of its credentials, never shows the password")
    func masked() throws {
        let proxy = try EgressProxy(url: "http://alice:hunter2@proxy:3128")
        #expect(proxy.description == "http://****@proxy:3128")
        #expect("\(proxy)" == "http://****@proxy:3128")
        #expect(String(reflecting: proxy) == "http://****@proxy:3128")
        #expect("\(proxy.credentials!)" == "<redacted>")
        #expect(proxy.credentials?.basicAuthorization == "Basic YWxpY2U6aHVudGVyMg==")
    }

    @Test(
        "a URL PushBridge cannot use is refused with what is wrong and how to write it, never quoting the URL",
        arguments: [
            ("https://alice:hunter2@proxy:3128", "https:// proxy"),
            ("socks5://alice:hunter2@proxy:1080", "scheme \"socks5\""),
            ("alice:hunter2@proxy:3128", "no scheme"),
            ("http://alice:hunter2@proxy", "no port"),
            ("http://alice:hunter2@proxy:", "no port"),
            ("http://alice:hunter2@proxy:99999", "port that is not a number from 1 to 65535"),
            ("http://alice:hunter2@proxy:31x8", "port that is not a number"),
            ("http://alice:hunter2@proxy:3128/path", "path or query"),
            ("http://alice:hunter2@:3128", "no host"),
            ("http://:hunter2@proxy:3128", "without a user name"),
            ("http://alice:hunter%zz@proxy:3128", "malformed % escape"),
        ])
    func refused(url: String, problem: String) {
        #expect {
            try EgressProxy(url: url)
        } throws: { error in
            let text = "\(error)"
            return text.contains(problem) && !text.contains("hunter") && text.contains("http://")
        }
    }

    @Test("without a scheme, HTTPS_PROXY's host:port means http://host:port, as curl and Go read it")
    func schemeOptional() throws {
        let proxy = try EgressProxy(url: "proxy.internal:3128", schemeOptional: true)
        #expect(proxy == EgressProxy(host: "proxy.internal", port: 3128))
    }
}

@Suite("HTTPS_PROXY, https_proxy, NO_PROXY, and which connections use a proxy")
struct EgressProxyPolicyTests {
    @Test("no variable set, or set empty, means no proxy")
    func unset() throws {
        #expect(try EgressProxyPolicy.fromEnvironment([:]) == .direct)
        #expect(try EgressProxyPolicy.fromEnvironment(["HTTPS_PROXY": " ", "https_proxy": ""]) == .direct)
        #expect(
            try EgressProxyPolicy.fromEnvironment(["HTTP_PROXY": "http://p:1", "ALL_PROXY": "http://p:2"]) == .direct)
    }

    @Test("https_proxy wins over HTTPS_PROXY, and no_proxy over NO_PROXY")
    func lowerCaseFirst() throws {
        let policy = try EgressProxyPolicy.fromEnvironment([
            "HTTPS_PROXY": "http://upper:1", "https_proxy": "http://lower:2", "NO_PROXY": "a.example",
            "no_proxy": "b.example",
        ])
        guard case .environment(let proxy, let variable, let bypass) = policy else {
            Issue.record("expected a proxy from the environment, got \(policy)")
            return
        }
        #expect(proxy == EgressProxy(host: "lower", port: 2))
        #expect(variable == "https_proxy")
        #expect(bypass.entries == ["b.example"])
        #expect(policy.proxy(forHost: "api.push.apple.com") == proxy)
        #expect(policy.proxy(forHost: "b.example") == nil)
        #expect(policy.proxy(forHost: "a.example") == proxy)
    }

    @Test("an unusable HTTPS_PROXY is an error naming the variable, never its value")
    func invalid() {
        #expect {
            try EgressProxyPolicy.fromEnvironment(["HTTPS_PROXY": "socks5://alice:hunter2@proxy:1080"])
        } throws: { error in
            let text = "\(error)"
            return text.contains("HTTPS_PROXY") && text.contains("socks5") && !text.contains("hunter2")
                && !text.contains("alice")
        }
    }

    @Test(
        "NO_PROXY matches domains and the names below them, addresses, CIDR blocks, host:port and *",
        arguments: [
            ("push.apple.com", "api.push.apple.com", true),
            (".push.apple.com", "api.push.apple.com", true),
            ("*.apple.com", "api.push.apple.com", true),
            ("api.push.apple.com", "api.push.apple.com", true),
            ("API.Push.Apple.com", "api.push.apple.COM", true),
            ("apple.com", "notapple.com", false),
            ("sandbox.push.apple.com", "api.push.apple.com", false),
            ("10.0.0.0/8", "10.1.2.3", true),
            ("10.0.0.0/8", "11.1.2.3", false),
            ("10.0.0.0/8", "10.example.com", false),
            ("17.188.1.2", "17.188.1.2", true),
            ("api.push.apple.com:443", "api.push.apple.com", true),
            ("[2001:db8::1]", "2001:db8::1", true),
            ("2001:db8::1", "2001:db8::1", true),
            ("foo, bar  *", "anything.example", true),
            ("", "api.push.apple.com", false),
        ])
    func noProxy(entries: String, host: String, bypassed: Bool) {
        #expect(NoProxyList(entries).matches(host) == bypassed)
    }

    @Test("an environment proxy is never used for loopback hosts; a configured one is")
    func loopback() {
        let proxy = EgressProxy(host: "proxy", port: 3128)
        let environment = EgressProxyPolicy.environment(proxy, variable: "HTTPS_PROXY", bypass: NoProxyList(""))
        for host in ["localhost", "127.0.0.1", "127.1.2.3", "::1", "[::1]", "sim.localhost"] {
            #expect(environment.proxy(forHost: host) == nil, "\(host)")
            #expect(EgressProxyPolicy.configured(proxy).proxy(forHost: host) == proxy, "\(host)")
        }
        #expect(environment.proxy(forHost: "128.0.0.1") == proxy)
        #expect(EgressProxyPolicy.direct.proxy(forHost: "api.push.apple.com") == nil)
    }
}

@Suite("The CONNECT handshake as a value: the request, and the proxy's answer read within bounds")
struct ProxyConnectStateMachineTests {
    @Test("the request names the target in CONNECT and Host, and sends Basic credentials when there are some")
    func request() {
        let plain = String(
            decoding: ProxyConnectStateMachine.request(host: "api.push.apple.com", port: 443, credentials: nil),
            as: UTF8.self)
        #expect(plain == "CONNECT api.push.apple.com:443 HTTP/1.1\r\nHost: api.push.apple.com:443\r\n\r\n")
        let withCredentials = String(
            decoding: ProxyConnectStateMachine.request(
                host: "::1", port: 2197, credentials: ProxyCredentials(username: "alice", password: "hunter2")),
            as: UTF8.self)
        #expect(
            withCredentials
                == "CONNECT [::1]:2197 HTTP/1.1\r\nHost: [::1]:2197\r\nProxy-Authorization: Basic YWxpY2U6aHVudGVyMg==\r\n\r\n"
        )
    }

    @Test("a 2xx opens the tunnel, whatever pieces it arrives in, and bytes after it are handed on")
    func established() {
        let head = Array("HTTP/1.1 200 Connection established\r\nVia: 1.1 proxy\r\n\r\n".utf8)
        let answer = head + [0x16, 0x03]
        for split in 0...answer.count {
            var machine = ProxyConnectStateMachine()
            let first = machine.received(answer[..<split])
            let second = machine.received(answer[split...])
            let actions = [first, second].filter { $0 != .readMore }
            // What comes after the answer in the piece that ends it is handed on; later pieces go on past the machine.
            let leftover = split < head.count ? [0x16, 0x03] : Array(answer[head.count..<split])
            #expect(actions == [.established(leftover: leftover)], "split \(split)")
        }
    }

    @Test("interim 1xx answers are skipped, and lines may end with a bare LF")
    func interimAndBareLineFeeds() {
        var machine = ProxyConnectStateMachine()
        #expect(machine.received(Array("HTTP/1.1 100 Continue\n\nHTTP/1.0 200\n\n".utf8)) == .established(leftover: []))
    }

    @Test("a refusal gives the status and the proxy's phrase, made printable")
    func refusal() {
        var machine = ProxyConnectStateMachine()
        let action = machine.received(
            Array("HTTP/1.0 407 Proxy Authentication Required\r\nProxy-Authenticate: Basic\r\n\r\n<html>".utf8))
        #expect(action == .fail(.refused(status: 407, reasonPhrase: "Proxy Authentication Required")))
        var hostile = ProxyConnectStateMachine()
        let escaped = hostile.received(Array("HTTP/1.1 403 No\u{1B}[31m\r\n\r\n".utf8))
        #expect(escaped == .fail(.refused(status: 403, reasonPhrase: "No\\u{1b}[31m")))
    }

    @Test("bytes that are not HTTP fail with a short printable excerpt")
    func garbage() {
        var machine = ProxyConnectStateMachine()
        let action = machine.received([0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 0x28, 0x0A])
        guard case .fail(.malformed(let what)) = action else {
            Issue.record("expected a malformed answer, got \(action)")
            return
        }
        #expect(what == #"an answer that is not HTTP: "\u{15}\u{3}\u{3}\u{0}\u{2}\u{2}(""#)
    }

    @Test("a status line longer than 1 KiB fails by its 1026th byte, however much more comes")
    func hugeStatusLine() {
        var machine = ProxyConnectStateMachine()
        #expect(machine.received(Array("HTTP/1.1 200 ".utf8)) == .readMore)
        var fed = 13
        var action = ProxyConnectStateMachine.Action.readMore
        while action == .readMore, fed < 1_000_000 {
            action = machine.received(CollectionOfOne(UInt8(ascii: "A")))
            fed += 1
        }
        #expect(action == .fail(.malformed("a status line longer than 1024 bytes")))
        #expect(fed <= ProxyConnectStateMachine.maxStatusLineBytes + 2)
    }

    @Test("an answer without end fails at 16 KiB, fed in pieces of any size, holding no more")
    func endlessHeaders() {
        for chunk in [1, 1000, 100_000] {
            var machine = ProxyConnectStateMachine()
            var action = machine.received(Array("HTTP/1.1 200 OK\r\n".utf8))
            var fed = 0
            let line = Array("X-Filler: \(String(repeating: "f", count: 1000))\r\n".utf8)
            var stream: [UInt8] = []
            while action == .readMore, fed < 10_000_000 {
                while stream.count < chunk { stream += line }
                action = machine.received(stream.prefix(chunk))
                stream.removeFirst(chunk)
                fed += chunk
            }
            #expect(action == .fail(.malformed("an answer longer than 16384 bytes without its end")), "chunk \(chunk)")
            #expect(fed <= ProxyConnectStateMachine.maxAnswerBytes + chunk, "chunk \(chunk)")
        }
    }

    @Test("after the answer nothing more is read as an answer")
    func finished() {
        var machine = ProxyConnectStateMachine()
        #expect(
            machine.received(Array("HTTP/1.1 502 Bad Gateway\r\n\r\n".utf8))
                == .fail(.refused(status: 502, reasonPhrase: "Bad Gateway")))
        #expect(machine.received(Array("HTTP/1.1 200 OK\r\n\r\n".utf8)) == .readMore)
    }
}

@Suite("What a proxy's refusal says")
struct EgressProxyErrorTests {
    let withCredentials = EgressProxy(
        host: "proxy", port: 3128, credentials: ProxyCredentials(username: "alice", password: "hunter2"))

    @Test("407 with credentials: the proxy refused them; the text names the proxy and the status, not the secret")
    func refusedCredentials() {
        let error = EgressProxyError.refused(
            status: 407, reasonPhrase: "Proxy Authentication Required", proxy: self.withCredentials,
            host: "api.push.apple.com", port: 443)
        #expect(
            "\(error)"
                == "through the proxy http://****@proxy:3128 to api.push.apple.com:443: the proxy refused the credentials (407 Proxy Authentication Required)"
        )
        #expect(error.code == .refused)
        #expect(error.status == 407)
    }

    @Test(
        "407 without credentials says to give some; 403 names the port to allow; 502 says the proxy cannot reach APNs")
    func otherStatuses() {
        let plain = EgressProxy(host: "proxy", port: 3128)
        let ask = EgressProxyError.refused(status: 407, reasonPhrase: "", proxy: plain, host: "h", port: 443)
        #expect(
            ask.detail
                == "the proxy asks for credentials (407 Proxy Authentication Required); give them as http://user:password@host:port"
        )
        let forbidden = EgressProxyError.refused(
            status: 403, reasonPhrase: "Access violation", proxy: plain, host: "h", port: 2197)
        #expect(
            forbidden.detail
                == "the proxy refused the tunnel to h:2197 (403 Access violation); its rules must allow CONNECT to port 2197"
        )
        let tinyproxy = EgressProxyError.refused(
            status: 401, reasonPhrase: "Unauthorized", proxy: self.withCredentials, host: "h", port: 443)
        #expect(
            tinyproxy.detail == "the proxy refused the credentials (401 Unauthorized)",
            "tinyproxy's answer to wrong ones")
        let gateway = EgressProxyError.refused(status: 502, reasonPhrase: "", proxy: plain, host: "h", port: 443)
        #expect(gateway.detail == "the proxy could not reach h:443 (502 Bad Gateway)")
    }
}
