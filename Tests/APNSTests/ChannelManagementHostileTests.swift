import APNSCore
import Crypto
import Foundation
import HTTP2
import TestSupport
import Testing

@testable import APNSClient

/// The channel management client against servers that answer what APNs never would (raw frames from
/// `HostileHTTP2Server`, over real TLS + HTTP/2): every answer outside the API's contract is a bounded
/// ``ChannelManagementError``, never a crash, a hang or a value taken on trust.
@Suite("Channel management against hostile servers", .timeLimit(.minutes(1)))
struct ChannelManagementHostileTests {
    static let tls: TestTLS = {
        do { return try TestTLS.generate() } catch { fatalError("cannot generate test TLS material: \(error)") }
    }()

    func client(_ server: HostileHTTP2Server, requestTimeout: Duration = .seconds(10)) -> ChannelManagementClient {
        let key = SigningKey(keyID: Fixtures.keyID, teamID: Fixtures.teamID, privateKey: P256.Signing.PrivateKey())
        return ChannelManagementClient(
            configuration: APNSClientConfiguration(
                endpoint: .init(host: "127.0.0.1", port: server.port),
                authentication: .token(ProviderTokenSource(key: key)),
                requestTimeout: requestTimeout,
                connectTimeout: .seconds(5),
                reconnectInitialDelay: .milliseconds(10),
                reconnectMaximumDelay: .milliseconds(200),
                additionalTrustRootsPEMFile: Self.tls.caCertificatePath,
                trustSystemRoots: false
            )
        )
    }

    /// A server answering every request with `status`, `headers` and `body` (empty: no DATA frame).
    func answering(status: Int, headers: [(String, String)] = [], body: [UInt8] = []) async throws
        -> HostileHTTP2Server
    {
        try await HostileHTTP2Server.start(
            tls: Self.tls,
            behaviour: .answer { HTTP2Frames.response(stream: $0, status: status, headers: headers, body: body) })
    }

    func expectFailure<Value>(
        _ server: HostileHTTP2Server, requestTimeout: Duration = .seconds(10),
        _ body: (ChannelManagementClient) async throws(ChannelManagementError) -> Value
    ) async -> ChannelManagementError? {
        let client = self.client(server, requestTimeout: requestTimeout)
        do {
            _ = try await body(client)
            await client.shutdown()
            await server.shutdown()
            return nil
        } catch {
            await client.shutdown()
            await server.shutdown()
            return error
        }
    }

    @Test("a 201 without apns-channel-id is a malformed response, not a channel")
    func createWithoutChannelID() async throws {
        let server = try await self.answering(status: 201, headers: [("apns-request-id", "r-1")])
        let error = await self.expectFailure(server) { client throws(ChannelManagementError) in
            try await client.create(bundleID: Fixtures.topic, storagePolicy: .noMessageStored)
        }
        #expect(error?.code == .malformedResponse)
        #expect(error?.description.contains("apns-channel-id") == true)
    }

    @Test("a channel ID with control characters or beyond 256 bytes is refused")
    func hostileChannelID() async throws {
        for value in ["abc\tdef", String(repeating: "A", count: 300)] {
            let server = try await self.answering(status: 201, headers: [("apns-channel-id", value)])
            let error = await self.expectFailure(server) { client throws(ChannelManagementError) in
                try await client.create(bundleID: Fixtures.topic, storagePolicy: .noMessageStored)
            }
            #expect(error?.code == .malformedResponse, "\(value.prefix(8))")
        }
    }

    @Test("a list body beyond the bound fails as a malformed response instead of being buffered")
    func hugeBody() async throws {
        let entry = "\"" + String(repeating: "A", count: 22) + "==\","
        let body = Array(("{\"channels\":[" + String(repeating: entry, count: 50_000) + "\"x\"]}").utf8)
        #expect(body.count > ChannelManagementClient.maximumResponseBodyBytes)
        let server = try await self.answering(status: 200, body: body)
        let error = await self.expectFailure(server) { client throws(ChannelManagementError) in
            try await client.list(bundleID: Fixtures.topic)
        }
        #expect(error?.code == .malformedResponse)
    }

    @Test(
        "answers that are not the documented JSON are malformed responses",
        arguments: [
            "not json", #"{"channels":"all"}"#, #"{"channels":[1,2]}"#, #"["a"]"#,
        ])
    func listNotJSON(body: String) async throws {
        let server = try await self.answering(status: 200, body: Array(body.utf8))
        let error = await self.expectFailure(server) { client throws(ChannelManagementError) in
            try await client.list(bundleID: Fixtures.topic)
        }
        #expect(error?.code == .malformedResponse)
    }

    @Test(
        "a read whose policy is not 0 or 1 is a malformed response",
        arguments: [
            #"{"message-storage-policy":7,"push-type":"LiveActivity"}"#,
            #"{"message-storage-policy":"1","push-type":"LiveActivity"}"#,
            #"{"push-type":"LiveActivity"}"#,
            "",
        ])
    func readNotJSON(body: String) async throws {
        let server = try await self.answering(status: 200, body: Array(body.utf8))
        let error = await self.expectFailure(server) { client throws(ChannelManagementError) in
            try await client.read(bundleID: Fixtures.topic, channelID: "AAAA")
        }
        #expect(error?.code == .malformedResponse)
    }

    @Test("an error answer without Apple's JSON keeps its status, with MalformedResponseBody as the reason")
    func errorWithoutJSON() async throws {
        let server = try await self.answering(status: 400, body: Array("<html>bad</html>".utf8))
        let error = await self.expectFailure(server) { client throws(ChannelManagementError) in
            try await client.delete(bundleID: Fixtures.topic, channelID: "AAAA")
        }
        #expect(error?.code == .rejected)
        #expect(error?.status == 400)
        #expect(error?.reason == .unknown(ErrorBody.malformedReason))
    }

    @Test("an unknown reason is bounded and escaped")
    func hostileReason() async throws {
        let reason = "Evil\\r\\n" + String(repeating: "x", count: 500)
        let server = try await self.answering(status: 400, body: Array(#"{"reason":"\#(reason)"}"#.utf8))
        let error = await self.expectFailure(server) { client throws(ChannelManagementError) in
            try await client.list(bundleID: Fixtures.topic)
        }
        guard case .unknown(let text) = error?.reason else {
            Issue.record("expected an unknown reason, got \(String(describing: error))")
            return
        }
        #expect(text.utf8.count <= APNSClient.maximumReasonBytes)
        #expect(!text.contains("\r") && !text.contains("\n"))
    }

    @Test("a server that never answers ends in a timeout within the request timeout")
    func unanswered() async throws {
        let server = try await HostileHTTP2Server.start(tls: Self.tls, behaviour: .answer { _ in [] })
        var waited = Duration.zero
        let error = await self.expectFailure(server, requestTimeout: .milliseconds(500)) {
            client throws(ChannelManagementError) in
            let started = ContinuousClock.now
            defer { waited = ContinuousClock.now - started }
            return try await client.list(bundleID: Fixtures.topic)
        }
        #expect(error?.code == .timeout)
        // The call itself, not the shutdowns after it. The bound only tells a timeout from a hang (the suite's
        // one-minute limit), halfway: connecting and the TLS handshake took 2.5 s under the parallel suite on an
        // unloaded 2-core host.
        #expect(waited >= .milliseconds(500))
        #expect(waited < .seconds(30))
    }

    @Test("nothing listening is unreachable, within the request timeout")
    func unreachable() async throws {
        let refusing = try RefusingPort()
        let port = refusing.port
        let client = ChannelManagementClient(
            configuration: APNSClientConfiguration(
                endpoint: .init(host: "127.0.0.1", port: port),
                authentication: .token(
                    ProviderTokenSource(
                        key: SigningKey(
                            keyID: Fixtures.keyID, teamID: Fixtures.teamID, privateKey: P256.Signing.PrivateKey()))),
                requestTimeout: .seconds(2), connectTimeout: .seconds(1),
                additionalTrustRootsPEMFile: Self.tls.caCertificatePath, trustSystemRoots: false))
        let error = await #expect(throws: ChannelManagementError.self) {
            try await client.list(bundleID: Fixtures.topic)
        }
        await client.shutdown()
        #expect(error?.code == .unreachable)
        withExtendedLifetime(refusing) {}
    }
}
