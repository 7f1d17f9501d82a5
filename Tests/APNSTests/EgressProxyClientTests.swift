import APNSClient
import APNSCore
import APNSSimulator
import BinaryProvider
import EgressProxy
import Foundation
import TestSupport
import TestWaiting
import Testing

/// APNs connections through a real HTTP proxy (Debian's tinyproxy, started by each test on 127.0.0.1): HTTP/2 pushes,
/// the binary gateway and the feedback service through `CONNECT` tunnels, TLS verified against the simulator; a
/// proxy that refuses the credentials, and one whose tunnel dies with a request in it.
@Suite(
    "APNs through an HTTP proxy (tinyproxy)", .enabled(if: TinyProxy.testsRun, Comment(rawValue: TinyProxy.missing)),
    .timeLimit(.minutes(2)))
struct EgressProxyClientTests {
    static let credentials = (user: "pushbridge", password: "pr0xy-s3cret")

    /// A simulator, and a tinyproxy in front of it that takes ``credentials``.
    func startWithProxy() async throws -> (SimulatorHarness, TinyProxy) {
        let harness = try await SimulatorHarness.start()
        return (
            harness, try await TinyProxy.start(connectPorts: [harness.simulator.port], credentials: Self.credentials)
        )
    }

    /// A client of `harness`'s simulator through `proxy`.
    func client(
        _ harness: SimulatorHarness, proxy: EgressProxy, requestTimeout: Duration = .seconds(20)
    ) -> APNSClient {
        APNSClient(
            configuration: APNSClientConfiguration(
                endpoint: .init(host: "127.0.0.1", port: harness.simulator.port), proxy: proxy,
                authentication: .token(harness.tokenSource()), connectionCount: 1, requestTimeout: requestTimeout,
                connectTimeout: .seconds(10), maxResends: 3, reconnectInitialDelay: .milliseconds(10),
                reconnectMaximumDelay: .milliseconds(200), additionalTrustRootsPEMFile: harness.tls.caCertificatePath,
                trustSystemRoots: false)
        ).running()
    }

    @Test("an HTTP/2 push goes through the proxy's tunnel, with TLS to the simulator, and is delivered")
    func http2Push() async throws {
        let (harness, proxy) = try await self.startWithProxy()
        defer { proxy.stop() }
        let client = self.client(
            harness,
            proxy: try EgressProxy(url: proxy.url(user: Self.credentials.user, password: Self.credentials.password)))
        let results = await sendMany(client, count: 20)
        await client.shutdown()
        #expect(results.values.flatMap { $0 }.allSatisfy { $0.status == 200 })
        #expect(harness.simulator.statistics.requestsAnswered == 20)
        #expect(proxy.log.contains("CONNECT 127.0.0.1:\(harness.simulator.port)"), "the proxy carried it: \(proxy.log)")
        await harness.stop()
    }

    @Test(
        "wrong proxy credentials: every notification ends Unreachable (the halting path), naming the proxy and its status, and nothing reaches APNs"
    )
    func refusedCredentials() async throws {
        let (harness, proxy) = try await self.startWithProxy()
        defer { proxy.stop() }
        // A request waits for a connection at most its timeout, then ends Unreachable with the last connect error.
        let client = self.client(
            harness, proxy: try EgressProxy(url: proxy.url(user: "pushbridge", password: "wrong-password")),
            requestTimeout: .seconds(2))
        let results = await sendMany(client, count: 5).values.flatMap { $0 }
        await client.shutdown()
        #expect(results.count == 5)
        for result in results {
            guard case .failed(.unreachable(let why)) = result else {
                Issue.record("expected Unreachable, got \(result)")
                continue
            }
            #expect(result.disposition == .systemic, "halts the line instead of failing the notification")
            #expect(why.contains("through the proxy http://****@127.0.0.1:\(proxy.port)"), "\(why)")
            // tinyproxy answers wrong credentials 401 (RFC 9110's 407 only when none are given).
            #expect(why.contains("the proxy refused the credentials (401 Unauthorized)"), "\(why)")
            #expect(!why.contains("wrong-password") && !why.contains("pushbridge:"), "\(why)")
        }
        #expect(harness.simulator.statistics.requestsReceived == 0)
        await harness.stop()
    }

    @Test("the proxy dies with a request in its tunnel: the request is sent again on a new tunnel and delivered")
    func tunnelDropped() async throws {
        let harness = try await SimulatorHarness.start { $0.latency = .milliseconds(1500) }
        var proxy = try await TinyProxy.start(connectPorts: [harness.simulator.port])
        let port = proxy.port
        let client = self.client(harness, proxy: EgressProxy(host: "127.0.0.1", port: port))
        let sent = Task { await client.send(Fixtures.notification(token: Fixtures.deviceToken(1))) }
        try #require(await harness.simulator.waitForStatistics(timeout: .seconds(60)) { $0.requestsReceived == 1 })
        proxy.stop()  // SIGKILL: the tunnel closes with the request unanswered
        proxy = try await TinyProxy.start(connectPorts: [harness.simulator.port], port: port)
        defer { proxy.stop() }
        let result = await sent.value
        await client.shutdown()
        #expect(result.status == 200, "\(result)")
        // At least once: the simulator saw it on the dead tunnel and again on the new one.
        #expect(harness.simulator.statistics.requestsReceived == 2)
        await harness.stop()
    }

    @Test("the binary gateway and its feedback service through the proxy")
    func binaryAndFeedback() async throws {
        let tls = try TestTLS.generate()
        defer { tls.remove() }
        var behaviour = BinaryGatewayBehaviour()
        behaviour.unregisteredTokens = [Fixtures.deviceToken(3)]
        let (gateway, feedback) = try await tls.startBinarySimulator(behaviour)
        let proxy = try await TinyProxy.start(
            connectPorts: [gateway.port, feedback.port], credentials: Self.credentials)
        defer { proxy.stop() }
        let egress = try EgressProxy(url: proxy.url(user: Self.credentials.user, password: Self.credentials.password))
        let credentials = CertificateCredentials(
            certificateChain: try tls.clientCertificateChain(), privateKey: try tls.clientPrivateKey())
        var sender = BinaryClientConfiguration(host: "127.0.0.1", port: gateway.port, credentials: credentials)
        sender.proxy = egress
        sender.additionalTrustRootsPEMFile = tls.caCertificatePath
        // The gateway's error packet for token 3 must come back within the quiet window, through tinyproxy: 300 ms
        // was too short on a loaded host (all five 200). Sent together, the five wait for one window, not five.
        sender.quietWindow = .seconds(2)
        let binary = try BinaryClient(configuration: sender)
        let statuses = await withTaskGroup(of: (Int, Int?).self) { group in
            for index in 0..<5 {
                group.addTask {
                    (index, await binary.send(Fixtures.notification(token: Fixtures.deviceToken(index))).status)
                }
            }
            var statuses = [Int?](repeating: nil, count: 5)
            for await (index, status) in group { statuses[index] = status }
            return statuses
        }
        await binary.close()
        #expect(statuses == [200, 200, 200, 400, 200])
        #expect(gateway.statistics.processed.count == 4)

        var poller = FeedbackClientConfiguration(host: "127.0.0.1", port: feedback.port, credentials: credentials)
        poller.proxy = egress
        poller.additionalTrustRootsPEMFile = tls.caCertificatePath
        let poll = try await FeedbackClient(configuration: poller).poll()
        #expect(poll.tuples.map(\.deviceToken) == [Fixtures.deviceToken(3)])
        #expect(proxy.log.contains("CONNECT 127.0.0.1:\(gateway.port)"))
        #expect(proxy.log.contains("CONNECT 127.0.0.1:\(feedback.port)"))
        await feedback.close()
        await gateway.close()
    }

    /// `pushbridge send` (the built executable) to `harness`'s simulator with `--proxy proxy`.
    func send(_ harness: SimulatorHarness, proxy: String) async throws -> (Int32, String) {
        let directory = try Fixtures.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let p8 = try Fixtures.writeP8(harness.key, in: directory)
        return try await SendCommandTests.run([
            "send", "--token", Fixtures.deviceToken(1), "--topic", Fixtures.topic, "--alert", "hello",
            "--endpoint", "https://127.0.0.1:\(harness.simulator.port)", "--ca-file", harness.tls.caCertificatePath,
            "--key-file", p8, "--key-id", Fixtures.keyID, "--team-id", Fixtures.teamID, "--timeout", "5",
            "--proxy", proxy,
        ])
    }

    @Test(
        "pushbridge send --proxy: delivered through the tunnel; with wrong credentials exit 1 naming the proxy and its status"
    )
    func sendCommand() async throws {
        let (harness, proxy) = try await self.startWithProxy()
        defer { proxy.stop() }
        let (status, output) = try await self.send(
            harness, proxy: proxy.url(user: Self.credentials.user, password: Self.credentials.password))
        #expect(status == 0, "\(output)")
        #expect(output.contains("status: 200"))

        let (refused, refusal) = try await self.send(
            harness, proxy: proxy.url(user: "pushbridge", password: "wrong-pass"))
        #expect(refused == 1)
        #expect(refusal.contains("reason: Unreachable"), "\(refusal)")
        #expect(refusal.contains("through the proxy http://****@127.0.0.1:\(proxy.port)"), "\(refusal)")
        #expect(refusal.contains("the proxy refused the credentials (401 Unauthorized)"), "\(refusal)")
        #expect(!refusal.contains("wrong-pass"))
        #expect(harness.simulator.statistics.requestsAnswered == 1)
        await harness.stop()
    }
}
