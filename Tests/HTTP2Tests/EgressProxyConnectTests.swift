import EgressProxy
import HTTP2
import TestSupport
import TestWaiting
import Testing

/// Connections through a proxy that answers `CONNECT` badly (`HostileProxy`): every answer ends the connect with an
/// error naming the proxy and what it did, within bounded memory (the answer's bounds are
/// `ProxyConnectStateMachine`'s, tested as a value in EgressProxyTests) and without hanging.
@Suite(.timeLimit(.minutes(1)))
struct EgressProxyConnectTests {
    /// Connects to an HTTP/2 server that does not exist, through `proxy`: only the proxy's answer matters.
    func connect(through proxy: Int, connectTimeout: Duration = .seconds(10)) async -> HTTP2Error? {
        await http2Error {
            try await HTTP2ClientConnection.connect(
                configuration: HTTP2ClientConfiguration(
                    host: "api.push.apple.com", port: 443,
                    proxy: EgressProxy(
                        host: "127.0.0.1", port: proxy,
                        credentials: ProxyCredentials(username: "alice", password: "hunter2")),
                    tls: HTTP2ClientTLS(additionalTrustRootsPEMFile: Material.tls.caCertificatePath),
                    connectTimeout: connectTimeout))
        }
    }

    /// Runs `behaviour` and checks the connect's error: `connectFailed`, naming the proxy with its credentials masked
    /// and the target, saying `expected`; the proxy's connection is closed afterwards.
    func expectFailure(_ behaviour: HostileProxy.Behaviour, saying expected: String) async throws {
        let proxy = try await HostileProxy.start(behaviour: behaviour)
        let error = await self.connect(through: proxy.port)
        #expect(error?.code == .connectFailed)
        let text = error.map { "\($0)" } ?? "no error"
        #expect(
            text.contains("through the proxy http://****@127.0.0.1:\(proxy.port) to api.push.apple.com:443"), "\(text)")
        #expect(text.contains(expected), "\(text)")
        #expect(!text.contains("hunter2") && !text.contains("alice"), "\(text)")
        #expect(try await eventually { proxy.connectionsClosed == proxy.connectionsAccepted }, "the client closed it")
        await proxy.shutdown()
    }

    @Test("an answer whose headers never end fails at 16 KiB: the client reads no more")
    func endlessHeader() async throws {
        try await self.expectFailure(.endlessHeader, saying: "an answer longer than 16384 bytes without its end")
    }

    @Test("a status line of megabytes fails after 1 KiB")
    func endlessStatusLine() async throws {
        try await self.expectFailure(.endlessStatusLine, saying: "a status line longer than 1024 bytes")
    }

    @Test("bytes that are not HTTP fail with an excerpt")
    func garbage() async throws {
        try await self.expectFailure(
            .garbage, saying: #"the proxy answered CONNECT with an answer that is not HTTP: "\u{15}"#)
    }

    @Test("407: the proxy refused the credentials, with the status")
    func refusedCredentials() async throws {
        try await self.expectFailure(
            .answer(Array("HTTP/1.1 407 Proxy Authentication Required\r\nProxy-Authenticate: Basic\r\n\r\n".utf8)),
            saying: "the proxy refused the credentials (407 Proxy Authentication Required)")
    }

    @Test("a close before any answer says so")
    func closedBeforeAnswer() async throws {
        try await self.expectFailure(.answer([]), saying: "the proxy closed the connection before answering CONNECT")
    }

    @Test("a proxy that never answers fails when the connect timeout passes, not later")
    func silent() async throws {
        let proxy = try await HostileProxy.start(behaviour: .silent)
        let started = ContinuousClock.now
        let error = await self.connect(through: proxy.port, connectTimeout: .seconds(1))
        let elapsed = ContinuousClock.now - started
        #expect(error?.code == .connectFailed)
        #expect(
            error.map { "\($0)" }?.contains("the proxy did not answer CONNECT within 1.0 seconds") == true,
            "\(String(describing: error))")
        // The deadline never fires early; 20 s only says the connect did not wait for another timeout.
        #expect(elapsed >= .seconds(1) && elapsed < .seconds(20))
        #expect(try await eventually { proxy.connectionsClosed == 1 })
        await proxy.shutdown()
    }

    @Test("no proxy listening: cannot connect to the proxy, naming it")
    func proxyDown() async throws {
        let refusing = try RefusingPort()
        let port = refusing.port
        let error = await self.connect(through: port)
        withExtendedLifetime(refusing) {}
        let text = error.map { "\($0)" } ?? "no error"
        #expect(text.contains("through the proxy http://****@127.0.0.1:\(port)"), "\(text)")
        #expect(text.contains("cannot connect to the proxy"), "\(text)")
    }
}
