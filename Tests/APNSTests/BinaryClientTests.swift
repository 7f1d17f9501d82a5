import APNSClient
import APNSCore
import APNSSimulator
import BinaryProvider
import Foundation
import TestSupport
import Testing

/// The binary sender against the simulator's binary gateway, over TLS with a client certificate: every
/// notification ends with exactly one result, whatever the gateway does.
@Suite("Binary client against the simulated gateway")
struct BinaryClientTests {
    struct Run {
        var results: [String: [APNSResult]]
        var gateway: BinaryGateway.Statistics
    }

    /// Sends `count` notifications (tokens 0..<count) through a new client to a new gateway with `behaviour`
    /// (whose server certificate the client does not trust when `untrustedGateway`).
    func run(
        _ behaviour: BinaryGatewayBehaviour, count: Int = 20, format: BinaryFormat = .framed,
        extra: [APNSCore.Notification] = [], untrustedGateway: Bool = false
    ) async throws -> Run {
        let tls = try TestTLS.generate()
        let serverTLS = untrustedGateway ? try TestTLS.generate(name: "Other") : tls
        let gateway = try await BinaryGateway.start(
            behaviour: behaviour, certificateChain: try serverTLS.serverCertificateChain(),
            privateKey: try serverTLS.serverPrivateKey(), clientCertificateTrustRoots: [try tls.caCertificate()])
        var configuration = BinaryClientConfiguration(
            host: "127.0.0.1", port: gateway.port,
            credentials: CertificateCredentials(
                certificateChain: try tls.clientCertificateChain(), privateKey: try tls.clientPrivateKey()))
        configuration.additionalTrustRootsPEMFile = tls.caCertificatePath
        configuration.format = format
        // Long enough that an error packet is never late for it, even on a loaded machine.
        configuration.quietWindow = .seconds(1)
        let client = try BinaryClient(configuration: configuration)
        let (stream, input) = AsyncStream.makeStream(of: (String, APNSResult).self)
        let notifications = (0..<count).map { Fixtures.notification(token: Fixtures.deviceToken($0)) } + extra
        for notification in notifications {
            client.send(notification) { input.yield((notification.deviceToken, $0)) }
        }
        var results: [String: [APNSResult]] = [:]
        let timeout = Task {
            try await Task.sleep(for: .seconds(30))
            input.finish()
        }
        var received = 0
        for await (token, result) in stream {
            results[token, default: []].append(result)
            received += 1
            if received == notifications.count { break }
        }
        timeout.cancel()
        // Late duplicates of a result would show here.
        try await Task.sleep(for: .milliseconds(400))
        await client.close()
        input.finish()
        for await (token, result) in stream { results[token, default: []].append(result) }
        let statistics = gateway.statistics
        await gateway.close()
        return Run(results: results, gateway: statistics)
    }

    static func status(_ result: APNSResult?) -> Int? {
        if case .answered(let response) = result { return response.status }
        return nil
    }

    static func reason(_ result: APNSResult?) -> Reason? {
        if case .answered(let response) = result { return response.reason }
        return nil
    }

    @Test(
        "everything well-formed is delivered once the quiet window passed; each is written once",
        arguments: BinaryFormat.allCases)
    func delivered(format: BinaryFormat) async throws {
        let run = try await self.run(BinaryGatewayBehaviour(), format: format)
        #expect(run.results.count == 20)
        #expect(run.results.values.allSatisfy { $0.count == 1 && Self.status($0.first) == 200 })
        #expect(run.gateway.processed.sorted() == (0..<20).map { Fixtures.deviceToken($0) }.sorted())
    }

    @Test(
        "an invalid token at the start, middle or end: it is refused, the others are delivered and written once",
        arguments: [0, 9, 19])
    func invalidToken(at index: Int) async throws {
        var behaviour = BinaryGatewayBehaviour()
        behaviour.unregisteredTokens = [Fixtures.deviceToken(index)]
        let run = try await self.run(behaviour)
        #expect(run.results.values.allSatisfy { $0.count == 1 }, "exactly one result per notification")
        let bad = run.results[Fixtures.deviceToken(index)]?.first
        #expect(Self.status(bad) == 400)
        #expect(Self.reason(bad) == .badDeviceToken)
        #expect(run.results.filter { Self.status($0.value.first) == 200 }.count == 19)
        let expected = (0..<20).filter { $0 != index }.map { Fixtures.deviceToken($0) }
        #expect(run.gateway.processed.sorted() == expected.sorted(), "nothing lost, nothing written twice")
        // The error closes the connection; what followed the bad one is written on a second connection.
        #expect(run.gateway.connections == (index == 19 ? 1 : 2))
    }

    @Test("two invalid tokens: the second error comes on the reconnected connection; both refused, the rest delivered")
    func errorOnReconnect() async throws {
        var behaviour = BinaryGatewayBehaviour()
        behaviour.unregisteredTokens = [Fixtures.deviceToken(3), Fixtures.deviceToken(12)]
        let run = try await self.run(behaviour)
        #expect(run.results.values.allSatisfy { $0.count == 1 })
        #expect(Self.reason(run.results[Fixtures.deviceToken(3)]?.first) == .badDeviceToken)
        #expect(Self.reason(run.results[Fixtures.deviceToken(12)]?.first) == .badDeviceToken)
        #expect(run.results.filter { Self.status($0.value.first) == 200 }.count == 18)
        #expect(run.gateway.processed.count == 18)
        #expect(run.gateway.connections >= 3)
    }

    @Test("the gateway's statistics keep the latest tokens and error packets up to their limit and count them all")
    func boundedStatistics() async throws {
        var behaviour = BinaryGatewayBehaviour()
        behaviour.recentLimit = 5
        let refused = [2, 5, 8, 11, 14, 17]
        behaviour.unregisteredTokens = Set(refused.map { Fixtures.deviceToken($0) })
        let run = try await self.run(behaviour)
        #expect(run.results.values.allSatisfy { $0.count == 1 })
        #expect(run.gateway.processedCount == 14)
        #expect(run.gateway.errorPacketCount == 6)
        // After each error packet the client writes the rest again in order, so the gateway processes them in
        // the order they were sent.
        let accepted = (0..<20).filter { !refused.contains($0) }.map { Fixtures.deviceToken($0) }
        #expect(run.gateway.processed == Array(accepted.suffix(5)), "the latest five, oldest first")
        #expect(run.gateway.errorPackets.count == 5)
        #expect(run.gateway.errorPackets.allSatisfy { $0.status == .invalidToken })
    }

    @Test("a shutdown packet names the last processed: everything is delivered, each written once")
    func shutdown() async throws {
        var behaviour = BinaryGatewayBehaviour()
        behaviour.shutdownAfter = 5
        let run = try await self.run(behaviour)
        #expect(run.results.values.allSatisfy { $0.count == 1 && Self.status($0.first) == 200 })
        #expect(run.results.count == 20)
        #expect(run.gateway.processed.sorted() == (0..<20).map { Fixtures.deviceToken($0) }.sorted())
        #expect(run.gateway.errorPackets.first?.status == .shutdown)
    }

    @Test("a connection dropped without a packet: everything unconfirmed is written again and delivered")
    func dropped() async throws {
        var behaviour = BinaryGatewayBehaviour()
        behaviour.dropAfter = 5
        let run = try await self.run(behaviour)
        #expect(run.results.values.allSatisfy { $0.count == 1 && Self.status($0.first) == 200 })
        #expect(run.results.count == 20)
        // The five processed before the drop were still unconfirmed: the protocol cannot tell, so they are
        // written again (the duplicates the protocol makes unavoidable).
        #expect(Set(run.gateway.processed) == Set((0..<20).map { Fixtures.deviceToken($0) }))
        #expect(run.gateway.drops == 1)
    }

    @Test("a processing error is a retryable answer for that notification only")
    func processingError() async throws {
        var behaviour = BinaryGatewayBehaviour()
        behaviour.processingErrorAt = 3
        let run = try await self.run(behaviour)
        let failed = run.results[Fixtures.deviceToken(2)]?.first
        #expect(Self.status(failed) == 500)
        #expect(failed?.disposition == .retryable)
        #expect(run.results.filter { Self.status($0.value.first) == 200 }.count == 19)
    }

    @Test("a notification the protocol cannot carry is refused locally and never written")
    func localRefusal() async throws {
        let short = Fixtures.notification(token: "abcd")
        let run = try await self.run(BinaryGatewayBehaviour(), count: 3, extra: [short])
        #expect(Self.reason(run.results["abcd"]?.first) == .badDeviceToken)
        #expect(run.gateway.processed.count == 3)
        #expect(run.gateway.errorPackets.isEmpty)
    }

    @Test("a gateway whose certificate is not trusted: nothing counts as delivered, everything fails Unreachable")
    func untrustedGateway() async throws {
        let run = try await self.run(BinaryGatewayBehaviour(), count: 5, untrustedGateway: true)
        #expect(run.results.count == 5)
        for results in run.results.values {
            #expect(results.count == 1)
            guard case .failed(.unreachable(let why)) = results.first else {
                Issue.record("expected Unreachable, got \(String(describing: results.first))")
                continue
            }
            #expect(why.contains("TLS"))
        }
        #expect(run.gateway.processed.isEmpty)
    }

    @Test("an extra CA file that does not load is a credential error naming the file")
    func badCAFile() throws {
        let tls = try TestTLS.generate()
        var configuration = BinaryClientConfiguration(
            host: "127.0.0.1", port: 1,
            credentials: CertificateCredentials(
                certificateChain: try tls.clientCertificateChain(), privateKey: try tls.clientPrivateKey()))
        configuration.additionalTrustRootsPEMFile = tls.directory.appendingPathComponent("missing.pem").path
        do {
            _ = try BinaryClient(configuration: configuration)
            Issue.record("a missing CA file was accepted")
        } catch let error as CredentialError {
            #expect(error.file.hasSuffix("missing.pem"))
        }
    }
}
