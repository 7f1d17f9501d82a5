import APNSClient
import APNSCore
import APNSSimulator
import BinaryProvider
import Foundation
import TestSupport
import Testing

/// The feedback client against the simulator's feedback service over TLS with a client certificate, and against
/// hostile services: every poll ends, within its bounds, whatever the service does.
// Serialized: the endless services keep the event loops busy, and a handshake timed against a deadline would
// compete with them.
@Suite("Feedback client", .serialized, .timeLimit(.minutes(1)))
struct FeedbackClientTests {
    let tls: TestTLS

    init() throws {
        self.tls = try TestTLS.generate()
    }

    func client(port: Int, tls: TestTLS? = nil, configure: (inout FeedbackClientConfiguration) -> Void = { _ in })
        throws -> FeedbackClient
    {
        let tls = tls ?? self.tls
        var configuration = FeedbackClientConfiguration(
            host: "127.0.0.1", port: port,
            credentials: CertificateCredentials(
                certificateChain: try tls.clientCertificateChain(), privateKey: try tls.clientPrivateKey()))
        configuration.additionalTrustRootsPEMFile = self.tls.caCertificatePath
        configure(&configuration)
        return try FeedbackClient(configuration: configuration)
    }

    /// A gateway refusing `unregistered` and its feedback service, on this suite's TLS material.
    func simulator(_ behaviour: BinaryGatewayBehaviour) async throws -> (BinaryGateway, BinaryFeedbackService) {
        try await self.tls.startBinarySimulator(behaviour)
    }

    @Test("the service reports the tokens the gateway refused, with the time it refused them, once")
    func refusedTokensAreReportedOnce() async throws {
        let dead = [Fixtures.deviceToken(3), Fixtures.deviceToken(5)]
        let onlyFeedback = FeedbackTuple(timeEpochSeconds: 1_600_000_000, token: [UInt8](repeating: 0xCD, count: 32))
        var behaviour = BinaryGatewayBehaviour()
        behaviour.unregisteredTokens = Set(dead)
        behaviour.feedbackTokens = [onlyFeedback]
        let (gateway, feedback) = try await self.simulator(behaviour)
        var sender = BinaryClientConfiguration(
            host: "127.0.0.1", port: gateway.port,
            credentials: CertificateCredentials(
                certificateChain: try self.tls.clientCertificateChain(), privateKey: try self.tls.clientPrivateKey()))
        sender.additionalTrustRootsPEMFile = self.tls.caCertificatePath
        sender.quietWindow = .milliseconds(300)
        let binary = try BinaryClient(configuration: sender)
        let before = UInt32(Date().timeIntervalSince1970)
        for index in 0..<6 {
            _ = await binary.send(Fixtures.notification(token: Fixtures.deviceToken(index)))
        }
        await binary.close()
        let after = UInt32(Date().timeIntervalSince1970)

        let client = try self.client(port: feedback.port)
        let first = try await client.poll()
        #expect(first.end == .closed)
        #expect(first.tuples.map(\.deviceToken) == [onlyFeedback.deviceToken] + dead)
        #expect(first.tuples[0].timeEpochSeconds == 1_600_000_000)
        #expect(first.tuples.dropFirst().allSatisfy { (before...after).contains($0.timeEpochSeconds) })
        #expect(first.bytesRead == 3 * 38)
        let second = try await client.poll()
        #expect(second.tuples.isEmpty, "reading drained the list")
        #expect(second.end == .closed)
        #expect(feedback.statistics.connections == 2)
        #expect(feedback.statistics.tuplesSent == 3)
        await feedback.close()
        await gateway.close()
    }

    @Test("a client certificate the service does not trust fails the poll")
    func untrustedClientCertificate() async throws {
        var behaviour = BinaryGatewayBehaviour()
        behaviour.feedbackTokens = [FeedbackTuple(timeEpochSeconds: 1, token: [UInt8](repeating: 1, count: 32))]
        let (gateway, feedback) = try await self.simulator(behaviour)
        let stranger = try TestTLS.generate(name: "Stranger")
        let client = try self.client(port: feedback.port, tls: stranger)
        await #expect(throws: FeedbackFailure.self) { try await client.poll() }
        #expect(gateway.statistics.feedbackReported == 0, "nothing was handed to a stranger")
        await feedback.close()
        await gateway.close()
    }

    @Test("nothing listening fails the poll, naming the service")
    func nothingListening() async throws {
        let refusing = try RefusingPort()
        let port = refusing.port
        let failure = await #expect(throws: FeedbackFailure.self) { try await self.client(port: port).poll() }
        withExtendedLifetime(refusing) {}
        #expect(failure?.reason.contains("127.0.0.1:\(port)") == true)
    }

    @Test("a service that never stops sending is cut at the tuple limit")
    func endlessService() async throws {
        let server = try await HostileFeedbackServer.start(tls: self.tls, behaviour: .endless)
        let client = try self.client(port: server.port) { $0.maxTuples = 5000 }
        let started = ContinuousClock.now
        let poll = try await client.poll()
        #expect(poll.end == .limitReached)
        #expect(poll.tuples.count == 5000)
        #expect(
            poll.bytesRead
                <= FeedbackClientConfiguration(host: "", port: 0, credentials: try self.credentials()).maxBytes)
        // Cut at the limit (0.7 s under the parallel suite), not read on until the default 30 s timeout: halfway.
        #expect(ContinuousClock.now - started < .seconds(15))
        await server.shutdown()
    }

    @Test("a service that never stops sending is cut at the byte limit")
    func endlessServiceBytes() async throws {
        let server = try await HostileFeedbackServer.start(tls: self.tls, behaviour: .endless)
        let client = try self.client(port: server.port) { $0.maxBytes = 100_000 }
        let poll = try await client.poll()
        #expect(poll.end == .limitReached)
        #expect(poll.bytesRead == 100_000)
        #expect(poll.tuples.count == 100_000 / 38)
        await server.shutdown()
    }

    @Test("a service that never closes is left after the timeout")
    func silentService() async throws {
        let server = try await HostileFeedbackServer.start(tls: self.tls, behaviour: .silent)
        let client = try self.client(port: server.port) { $0.timeout = .seconds(2) }
        let started = ContinuousClock.now
        let poll = try await client.poll()
        #expect(poll.end == .timedOut)
        #expect(poll.tuples.isEmpty)
        // Tells the 2 s timeout from a hang; loaded CI hosts add seconds.
        #expect(ContinuousClock.now - started < .seconds(15))
        await server.shutdown()
    }

    @Test("bytes that are not tuples stop reading; what arrived whole is kept")
    func malformedService() async throws {
        let good = FeedbackTuple(timeEpochSeconds: 7, token: [UInt8](repeating: 2, count: 32))
        let server = try await HostileFeedbackServer.start(
            tls: self.tls, behaviour: .bytes(good.bytes + [0, 0, 0, 1, 0xFF, 0xFF] + [UInt8](repeating: 0, count: 64)))
        let poll = try await self.client(port: server.port).poll()
        #expect(poll.tuples == [good])
        guard case .malformed(let detail) = poll.end else {
            Issue.record("ended \(poll.end)")
            return
        }
        #expect(detail.contains("65535-byte token"))
        await server.shutdown()
    }

    @Test("a tuple cut by the close is dropped and said so")
    func truncatedTuple() async throws {
        let good = FeedbackTuple(timeEpochSeconds: 7, token: [UInt8](repeating: 2, count: 32))
        let server = try await HostileFeedbackServer.start(
            tls: self.tls, behaviour: .bytes(good.bytes + Array(good.bytes.prefix(20))))
        let poll = try await self.client(port: server.port).poll()
        #expect(poll.tuples == [good])
        #expect(poll.end == .truncated)
        await server.shutdown()
    }

    @Test("cancelling a poll ends it at once with what was read")
    func cancelled() async throws {
        let server = try await HostileFeedbackServer.start(tls: self.tls, behaviour: .silent)
        let client = try self.client(port: server.port) { $0.timeout = .seconds(30) }
        let started = ContinuousClock.now
        let task = Task { try await client.poll() }
        try await Task.sleep(for: .seconds(1))
        task.cancel()
        let poll = try await task.value
        #expect(poll.end == .cancelled)
        // Well under the 30 s timeout, with room for a loaded CI host.
        #expect(ContinuousClock.now - started < .seconds(15))
        await server.shutdown()
    }

    func credentials() throws -> CertificateCredentials {
        CertificateCredentials(
            certificateChain: try self.tls.clientCertificateChain(), privateKey: try self.tls.clientPrivateKey())
    }
}
