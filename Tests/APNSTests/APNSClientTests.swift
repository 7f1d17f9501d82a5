import APNSClient
import APNSCore
import APNSSimulator
import Crypto
import Foundation
import HTTP2
import Synchronization
import TestSupport
import TestWaiting
import Testing

@Suite("APNs client against the simulator (TLS + HTTP/2 on 127.0.0.1)", .timeLimit(.minutes(1)))
struct APNSClientTests {
    @Test("a valid notification is answered 200 with its apns-id and an apns-unique-id")
    func delivered() async throws {
        let harness = try await SimulatorHarness.start()
        let client = harness.client()
        let notification = Fixtures.notification()
        let result = await client.send(notification)
        await client.shutdown()
        await harness.stop()
        let response = try #require(result.response)
        #expect(response.status == 200)
        #expect(response.apnsID == notification.apnsID)
        #expect(response.apnsUniqueID.flatMap(UUID.init(uuidString:)) != nil)
    }

    @Test("every push type, with expiration and collapse id, is accepted over the wire", arguments: PushType.allCases)
    func everyPushType(pushType: PushType) async throws {
        let harness = try await SimulatorHarness.start()
        let client = harness.client(connections: 1)
        var notification = Fixtures.notification(pushType: pushType)
        notification.expirationEpochSeconds = 0
        notification.collapseID = "group-1"
        let result = await client.send(notification)
        await client.shutdown()
        await harness.stop()
        #expect(result.status == 200)
    }

    @Test("an unregistered token comes back 410 with the timestamp and the invalid-token flag")
    func unregistered() async throws {
        let token = Fixtures.deviceToken(9)
        let harness = try await SimulatorHarness.start { $0.unregisteredTokens[token] = 1_700_000_000_000 }
        let client = harness.client()
        let result = await client.send(Fixtures.notification(token: token))
        await client.shutdown()
        await harness.stop()
        let response = try #require(result.response)
        #expect(response.status == 410)
        #expect(response.reason == .unregistered)
        #expect(response.reason?.invalidatesToken == true)
        #expect(response.invalidSinceEpochMilliseconds == 1_700_000_000_000)
    }

    @Test("one provider token is shared by every connection")
    func tokenShared() async throws {
        let harness = try await SimulatorHarness.start()
        let source = harness.tokenSource()
        let client = harness.client(authentication: .token(source), connections: 3)
        _ = await client.send(Fixtures.notification())
        // The pool opens its other connections in the background; wait (bounded) until all three are up.
        let deadline = ContinuousClock.now + .seconds(30)
        while client.openConnections < 3 && ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(10))
        }
        let results = await sendMany(client, count: 600)
        await client.shutdown()
        let statistics = harness.simulator.statistics
        await harness.stop()
        #expect(results.values.allSatisfy { $0.count == 1 && $0[0].status == 200 })
        #expect(statistics.providerTokenAdoptions >= 2)
        #expect(statistics.distinctProviderTokens == 1)
        #expect(source.tokensIssued == 1)
    }

    @Test("batches on three connections: each batch is leased at once, every request answered exactly once")
    func batchesLeasedWhole() async throws {
        let harness = try await SimulatorHarness.start()
        let client = harness.client(authentication: .token(harness.tokenSource()), connections: 3)
        _ = await client.send(Fixtures.notification())
        #expect(try await eventually { client.openConnections == 3 })
        // Two rounds: a lease count that was not given back whole would skew the second round's choice, not break
        // it, so what is checked is that every request of both rounds ends once and the connections stay up.
        for round in 0..<2 {
            let results = await sendManyWithCallbacks(client, count: 600, firstToken: round * 600, batch: 64)
            #expect(results.count == 600)
            #expect(results.values.allSatisfy { $0.count == 1 && $0[0].status == 200 })
        }
        #expect(client.openConnections == 3)
        await client.shutdown()
        await harness.stop()
    }

    @Test("ExpiredProviderToken renews the token once and the request is retried")
    func renewedOnExpiry() async throws {
        let harness = try await SimulatorHarness.start()
        // The client's clock runs 65 minutes behind: its first token is already expired for the simulator.
        let clock = ManualClock(Date().addingTimeInterval(-65 * 60))
        let source = harness.tokenSource(clock: clock)
        _ = try source.currentToken()
        clock.advance(by: .seconds(25 * 60))
        let client = harness.client(authentication: .token(source))
        let result = await client.send(Fixtures.notification())
        await client.shutdown()
        let statistics = harness.simulator.statistics
        await harness.stop()
        #expect(result.status == 200)
        #expect(source.tokensIssued == 2)
        #expect(statistics.byReason["ExpiredProviderToken"] == 1)
        #expect(statistics.byStatus[200] == 1)
    }

    @Test("GOAWAY every 100 streams with 3000 requests: each completes exactly once")
    func goAwayEveryNStreams() async throws {
        let harness = try await SimulatorHarness.start { $0.goawayAfterStreams = 100 }
        let client = harness.client(connections: 2, maxResends: 10)
        let results = await sendMany(client, count: 3000)
        await client.shutdown()
        let statistics = harness.simulator.statistics
        await harness.stop()
        #expect(results.count == 3000)
        #expect(results.values.allSatisfy { $0.count == 1 && $0[0].status == 200 })
        #expect(statistics.byStatus[200] == 3000)
        #expect(statistics.tokensDeliveredMoreThanOnce.isEmpty)
    }

    @Test("the stream limit falls to 1 and rises again: every request completes")
    func streamLimitToOneAndBack() async throws {
        let harness = try await SimulatorHarness.start {
            $0.streamLimitSchedule = [
                .init(afterStreams: 50, maxConcurrentStreams: 1),
                .init(afterStreams: 250, maxConcurrentStreams: 1000),
            ]
        }
        let client = harness.client(connections: 1)
        let results = await sendMany(client, count: 1000)
        await client.shutdown()
        let statistics = harness.simulator.statistics
        await harness.stop()
        #expect(results.values.allSatisfy { $0.count == 1 && $0[0].status == 200 })
        #expect(statistics.streamLimitChanges >= 2)
        #expect(statistics.byStatus[200] == 1000)
    }

    @Test("connections dropped mid-flight: every request re-sent, none lost, none answered twice")
    func droppedConnections() async throws {
        // 100 streams per connection bound what one drop swallows; each connection answers 499 before its drop.
        let harness = try await SimulatorHarness.start {
            $0.dropAfterStreams = 500
            $0.maxConcurrentStreams = 100
        }
        let client = harness.client(connections: 2, maxResends: 20)
        let results = await sendMany(client, count: 2000)
        await client.shutdown()
        let statistics = harness.simulator.statistics
        await harness.stop()
        #expect(results.count == 2000)
        let failures = results.values.filter { $0.count != 1 || $0[0].status != 200 }
        #expect(failures.isEmpty, "\(failures.count) not delivered, e.g. \(failures.prefix(3))")
        #expect(statistics.connectionsDropped >= 1)
        #expect(statistics.requestsUnanswered >= 1)
        #expect(statistics.byStatus[200] == 2000)
        #expect(statistics.tokensDeliveredMoreThanOnce.isEmpty)
    }

    @Test(
        "callback sends, alone and in batches of 64, complete each request once through GOAWAYs and dropped connections",
        arguments: ["goaway", "drop"], [1, 64])
    func callbackSends(fault: String, batch: Int) async throws {
        let harness = try await SimulatorHarness.start {
            if fault == "goaway" {
                $0.goawayAfterStreams = 100
            } else {
                $0.dropAfterStreams = 500
                $0.maxConcurrentStreams = 100
            }
        }
        let client = harness.client(connections: 2, maxResends: 20)
        // The first send finds no connection open and goes on in a task; once one is open, sends need none.
        #expect(await sendManyWithCallbacks(client, count: 1, firstToken: 5000).values.first?.first?.status == 200)
        let results = await sendManyWithCallbacks(client, count: 2000, batch: batch)
        await client.shutdown()
        let statistics = harness.simulator.statistics
        await harness.stop()
        #expect(results.count == 2000)
        let failures = results.values.filter { $0.count != 1 || $0[0].status != 200 }
        #expect(failures.isEmpty, "\(failures.count) not delivered, e.g. \(failures.prefix(3))")
        #expect(statistics.byStatus[200] == 2001)
        #expect(statistics.tokensDeliveredMoreThanOnce.isEmpty)
        if fault == "drop" { #expect(statistics.connectionsDropped >= 1) }
    }

    @Test("a callback send with no server ends unreachable, not silent")
    func callbackUnreachable() async throws {
        let harness = try await SimulatorHarness.start()
        let refusing = try RefusingPort()
        let client = harness.client(port: refusing.port)
        let results = await sendManyWithCallbacks(client, count: 3)
        await client.shutdown()
        await harness.stop()
        withExtendedLifetime(refusing) {}
        #expect(results.values.flatMap { $0 }.count == 3)
        for result in results.values.flatMap({ $0 }) {
            guard case .failed(.unreachable) = result else {
                Issue.record("expected unreachable, got \(result)")
                continue
            }
        }
    }

    @Test("a request times out when the simulator answers later than the timeout")
    func requestTimeout() async throws {
        // The answer would take 120 s, so the bound only tells a timeout from waiting for the answer, halfway between
        // them. The request measured goes out on an open connection: while one is still being opened, the attempt's
        // time waiting for it counts towards the request timeout too (docs/apns-client.md), and connecting on a
        // loaded machine may take seconds (15 s was once exceeded by 0.7 s in make test-stress). A first send opens
        // it; its own result does not matter here.
        let harness = try await SimulatorHarness.start { $0.latency = .seconds(120) }
        let client = harness.client(requestTimeout: .milliseconds(300))
        let opening = Task { await client.send(Fixtures.notification()) }
        try await waitUntil { client.openConnections > 0 }
        let started = ContinuousClock.now
        let result = await client.send(Fixtures.notification())
        let elapsed = ContinuousClock.now - started
        _ = await opening.value
        await client.shutdown()
        await harness.stop()
        #expect(result == .failed(.timeout))
        #expect(elapsed < .seconds(60))
    }

    @Test("no server: the result is unreachable, not a hang")
    func unreachable() async throws {
        let harness = try await SimulatorHarness.start()
        await harness.stop()
        let refusing = try RefusingPort()
        let client = APNSClient(
            configuration: APNSClientConfiguration(
                endpoint: .init(host: "127.0.0.1", port: refusing.port),
                authentication: .token(harness.tokenSource()),
                requestTimeout: .milliseconds(500),
                connectTimeout: .milliseconds(300),
                reconnectInitialDelay: .milliseconds(10),
                reconnectMaximumDelay: .milliseconds(50),
                trustSystemRoots: false
            )
        ).running()
        let result = await client.send(Fixtures.notification())
        await client.shutdown()
        withExtendedLifetime(refusing) {}
        guard case .failed(.unreachable) = result else {
            Issue.record("expected unreachable, got \(result)")
            return
        }
    }

    @Test("a notification breaking Apple's rules is answered locally with Apple's reason")
    func localValidation() async throws {
        let harness = try await SimulatorHarness.start()
        let client = harness.client()
        let result = await client.send(Fixtures.notification(pushType: .background, priority: .immediate))
        await client.shutdown()
        let received = harness.simulator.statistics.requestsReceived
        await harness.stop()
        #expect(result.response?.reason == .badPriority)
        #expect(result.response?.status == 400)
        #expect(received == 0)
    }
}

@Suite("Certificate authentication over mutual TLS", .timeLimit(.minutes(1)))
struct CertificateAuthenticationTests {
    @Test("a PEM client certificate is accepted without a provider token")
    func pemCertificate() async throws {
        let tls = try TestTLS.generate()
        defer { tls.remove() }
        let credentials = try CertificateCredentials.load(
            certificatePEMPath: tls.clientCertificatePath, keyPEMPath: tls.clientKeyPath
        )
        #expect(try await Self.send(trusting: tls, credentials: credentials).status == 200)
    }

    @Test("a .p12 bundle loads with its password and is accepted")
    func p12Certificate() async throws {
        let tls = try TestTLS.generate()
        defer { tls.remove() }
        let p12 = try await Self.exportP12(tls, password: "s3cret-pass")
        let credentials = try CertificateCredentials.load(p12Path: p12, password: "s3cret-pass")
        #expect(try await Self.send(trusting: tls, credentials: credentials).status == 200)
    }

    /// Sends one notification with `credentials` to a simulator that trusts client certificates of `tls`'s CA.
    static func send(trusting tls: TestTLS, credentials: CertificateCredentials) async throws -> APNSResult {
        let harness = try await SimulatorHarness.start { $0.clientCAFile = tls.caCertificatePath }
        let client = harness.client(authentication: .certificate(credentials))
        let result = await client.send(Fixtures.notification())
        await client.shutdown()
        await harness.stop()
        return result
    }

    @Test("without a client certificate the mutual-TLS simulator cannot be reached")
    func certificateRequired() async throws {
        let tls = try TestTLS.generate()
        defer { tls.remove() }
        let harness = try await SimulatorHarness.start { $0.clientCAFile = tls.caCertificatePath }
        let client = harness.client(requestTimeout: .seconds(1))
        let result = await client.send(Fixtures.notification())
        await client.shutdown()
        let received = harness.simulator.statistics.requestsReceived
        await harness.stop()
        #expect(result.status == nil)
        #expect(received == 0)
    }

    @Test("a wrong .p12 password is a clear error naming the file and not the password")
    func wrongP12Password() async throws {
        let tls = try TestTLS.generate()
        defer { tls.remove() }
        let p12 = try await Self.exportP12(tls, password: "right-password")
        let error = #expect(throws: CredentialError.self) {
            try CertificateCredentials.load(p12Path: p12, password: "wrong-password")
        }
        #expect(error?.code == .invalidPKCS12)
        #expect(error?.description.contains(p12) == true)
        #expect(error?.description.contains("password is wrong") == true)
        #expect(error?.description.contains("wrong-password") == false)
        #expect(error?.description.contains("right-password") == false)
    }

    static func exportP12(_ tls: TestTLS, password: String) async throws -> String {
        try await tls.exportClientP12(password: password)
    }
}

@Suite("HPACK as Apple asks", .timeLimit(.minutes(1)))
struct APNSHeaderIndexingTests {
    @Test("apns-id, apns-expiration and apns-collapse-id are indexed once per connection; authorization never")
    func appleHPACKGuidance() async throws {
        let tls = try TestTLS.generate()
        let received = Mutex<[[String: HTTP2HeaderIndexing]]>([])
        let server = try await HTTP2Server.start(
            configuration: HTTP2ServerConfiguration(
                certificateChain: try tls.serverCertificateChain(),
                privateKey: try tls.serverPrivateKey()
            )
        ) { request, _, responder in
            let fields = Dictionary(request.headers.map { ($0.name, $0.indexing) }, uniquingKeysWith: { a, _ in a })
            received.withLock { $0.append(fields) }
            responder.respond(HTTP2ServerResponse(status: 200))
        }
        let client = MalformedResponseTests.client(of: server, tls: tls, connections: 1)
        for index in 0..<3 {
            let notification = Notification(
                deviceToken: Fixtures.deviceToken(index + 1),
                topic: Fixtures.topic,
                pushType: .alert,
                expirationEpochSeconds: 1_800_000_000 + Int64(index),
                collapseID: "order-\(index)",
                id: UUID(),
                payload: Array(#"{"aps":{"alert":"hi"}}"#.utf8)
            )
            #expect(await client.send(notification).response?.status == 200)
        }
        await client.shutdown()
        await server.shutdown()
        tls.remove()
        let fields = received.withLock { $0 }
        try #require(fields.count == 3)
        for (index, request) in fields.enumerated() {
            let once: HTTP2HeaderIndexing = index == 0 ? .incremental : .never
            #expect(request["apns-id"] == once, "request \(index)")
            #expect(request["apns-expiration"] == once, "request \(index)")
            #expect(request["apns-collapse-id"] == once, "request \(index)")
            #expect(request["authorization"] == .never, "request \(index)")
            #expect(request["apns-topic"] == .incremental, "request \(index)")
            #expect(request["apns-push-type"] == .incremental, "request \(index)")
        }
    }
}

@Suite("Malformed responses", .timeLimit(.minutes(1)))
struct MalformedResponseTests {
    @Test("a response without :status and an error body that is not JSON become classified results")
    func malformed() async throws {
        let tls = try TestTLS.generate()
        let server = try await HTTP2Server.start(
            configuration: HTTP2ServerConfiguration(
                certificateChain: try tls.serverCertificateChain(),
                privateKey: try tls.serverPrivateKey()
            )
        ) { request, _, responder in
            if request.path.hasSuffix(Fixtures.deviceToken(1)) {
                responder.respond(HTTP2ServerResponse(status: nil))
            } else {
                responder.respond(HTTP2ServerResponse(status: 400, body: Array("<html>oops</html>".utf8)))
            }
        }
        let client = Self.client(of: server, tls: tls)
        let noStatus = await client.send(Fixtures.notification(token: Fixtures.deviceToken(1)))
        let badBody = await client.send(Fixtures.notification(token: Fixtures.deviceToken(2)))
        await client.shutdown()
        await server.shutdown()
        tls.remove()
        guard case .failed(.malformedResponse) = noStatus else {
            Issue.record("expected malformedResponse, got \(noStatus)")
            return
        }
        #expect(noStatus.disposition == .retryable)
        #expect(badBody.response?.reason == .unknown(ErrorBody.malformedReason))
        #expect(badBody.disposition == .rejected)
    }

    /// A client of `server` (a test `HTTP2Server` on 127.0.0.1) with a throwaway signing key, trusting only `tls`.
    static func client(of server: HTTP2Server, tls: TestTLS, connections: Int = 2) -> APNSClient {
        APNSClient(
            configuration: APNSClientConfiguration(
                endpoint: .init(host: "127.0.0.1", port: server.port),
                authentication: .token(
                    ProviderTokenSource(
                        key: SigningKey(keyID: Fixtures.keyID, teamID: Fixtures.teamID, privateKey: .init())
                    )
                ),
                connectionCount: connections,
                requestTimeout: .seconds(5),
                additionalTrustRootsPEMFile: tls.caCertificatePath,
                trustSystemRoots: false
            )
        ).running()
    }
}
