import APNSCore
import APNSSimulator
import Foundation
import HTTP2
import TestSupport
import Testing

@testable import APNSClient

extension SimulatorHarness {
    /// A channel management client for the simulator (which serves the management API on its one port).
    func channelClient(
        authentication: APNSAuthentication? = nil, requestTimeout: Duration = .seconds(10)
    ) -> ChannelManagementClient {
        ChannelManagementClient(
            configuration: APNSClientConfiguration(
                endpoint: .init(host: "127.0.0.1", port: self.simulator.port),
                authentication: authentication ?? .token(self.tokenSource()),
                requestTimeout: requestTimeout,
                connectTimeout: .seconds(5),
                additionalTrustRootsPEMFile: self.tls.caCertificatePath,
                trustSystemRoots: false
            )
        )
    }

    /// One raw request to the simulator over TLS + HTTP/2, with the harness's provider token.
    func rawRequest(
        _ method: String, _ path: String, headers: [(String, String)] = [], body: String = ""
    ) async throws -> HTTP2Response {
        let connection = try await HTTP2ClientConnection.connect(
            configuration: HTTP2ClientConfiguration(
                host: "127.0.0.1", port: self.simulator.port,
                tls: HTTP2ClientTLS(additionalTrustRootsPEMFile: self.tls.caCertificatePath, trustSystemRoots: false),
                requestTimeout: .seconds(10), connectTimeout: .seconds(5)))
        let token = try self.tokenSource().currentToken()
        var fields = headers.map { HTTP2Header($0.0, $0.1) }
        fields.append(HTTP2Header("authorization", "bearer \(token.compact)"))
        let response = try await connection.send(
            HTTP2Request(method: method, path: path, headers: fields, body: Array(body.utf8)))
        await connection.close()
        return response
    }
}

/// The channel management client against the simulator over real TLS + HTTP/2 (Apple: *Sending channel
/// management requests to APNs*).
@Suite("Broadcast channel management", .timeLimit(.minutes(1)))
struct ChannelManagementTests {
    @Test("create, list, read and delete round-trip with a provider token")
    func roundTripWithToken() async throws {
        let harness = try await SimulatorHarness.start()
        let client = harness.channelClient()
        let requestID = UUID()
        let created = try await client.create(
            bundleID: Fixtures.topic, storagePolicy: .mostRecentMessageStored, requestID: requestID)
        #expect(created.requestID == requestID.uuidString.lowercased(), "apns-request-id is echoed")
        #expect(Data(base64Encoded: created.value) != nil, "channel IDs are base64")
        let other = try await client.create(bundleID: Fixtures.topic, storagePolicy: .noMessageStored)

        #expect(try await client.list(bundleID: Fixtures.topic).value == [created.value, other.value])
        let read = try await client.read(bundleID: Fixtures.topic, channelID: created.value)
        #expect(read.value == ChannelConfiguration(storagePolicy: .mostRecentMessageStored, pushType: "LiveActivity"))
        #expect(read.requestID != nil, "APNs generates a request ID when the request has none")

        _ = try await client.delete(bundleID: Fixtures.topic, channelID: created.value)
        #expect(try await client.list(bundleID: Fixtures.topic).value == [other.value])
        let statistics = harness.simulator.statistics
        await client.shutdown()
        await harness.stop()
        #expect(statistics.channelsCreated == 2)
        #expect(statistics.channelsDeleted == 1)
        #expect(statistics.byStatus[201] == 2)
        #expect(statistics.byStatus[204] == 1)
    }

    @Test("the round trip works with a client certificate instead of a token")
    func roundTripWithCertificate() async throws {
        let clientTLS = try TestTLS.generate()
        defer { clientTLS.remove() }
        let harness = try await SimulatorHarness.start { $0.clientCAFile = clientTLS.caCertificatePath }
        let credentials = try CertificateCredentials.load(
            certificatePEMPath: clientTLS.clientCertificatePath, keyPEMPath: clientTLS.clientKeyPath)
        let client = harness.channelClient(authentication: .certificate(credentials))
        let created = try await client.create(bundleID: Fixtures.topic, storagePolicy: .noMessageStored)
        #expect(try await client.list(bundleID: Fixtures.topic).value == [created.value])
        #expect(
            try await client.read(bundleID: Fixtures.topic, channelID: created.value).value.storagePolicy
                == .noMessageStored)
        _ = try await client.delete(bundleID: Fixtures.topic, channelID: created.value)
        #expect(try await client.list(bundleID: Fixtures.topic).value == [])
        let statistics = harness.simulator.statistics
        await client.shutdown()
        await harness.stop()
        #expect(statistics.providerTokenAdoptions == 0, "no provider token was needed")
    }

    @Test("past the per-app limit a create is refused with CannotCreateChannelConfig; other apps are not affected")
    func channelLimit() async throws {
        let harness = try await SimulatorHarness.start {
            $0.channelLimitPerApp = 2
            $0.topics = [Fixtures.topic, "com.example.other"]
        }
        let client = harness.channelClient()
        for _ in 0..<2 { _ = try await client.create(bundleID: Fixtures.topic, storagePolicy: .noMessageStored) }
        let error = await #expect(throws: ChannelManagementError.self) {
            try await client.create(bundleID: Fixtures.topic, storagePolicy: .noMessageStored)
        }
        _ = try await client.create(bundleID: "com.example.other", storagePolicy: .noMessageStored)
        // Deleting one makes room again.
        let first = try await client.list(bundleID: Fixtures.topic).value[0]
        _ = try await client.delete(bundleID: Fixtures.topic, channelID: first)
        _ = try await client.create(bundleID: Fixtures.topic, storagePolicy: .noMessageStored)
        await client.shutdown()
        await harness.stop()
        #expect(error?.code == .rejected)
        #expect(error?.status == 400)
        #expect(error?.reason == .cannotCreateChannelConfig)
        #expect(error?.description.contains("channel limit") == true)
    }

    @Test("without topics the channels of all apps together are bounded: past the total a create is refused")
    func totalChannelLimit() async throws {
        let harness = try await SimulatorHarness.start {
            $0.channelLimitTotal = 3
            $0.topics = []
        }
        let client = harness.channelClient()
        var created: [String] = []
        for app in 0..<3 {
            let channel = try await client.create(bundleID: "com.example.app\(app)", storagePolicy: .noMessageStored)
            created.append(channel.value)
        }
        let error = await #expect(throws: ChannelManagementError.self) {
            try await client.create(bundleID: "com.example.app3", storagePolicy: .noMessageStored)
        }
        // Deleting one makes room again, for any app.
        _ = try await client.delete(bundleID: "com.example.app0", channelID: created[0])
        _ = try await client.create(bundleID: "com.example.app3", storagePolicy: .noMessageStored)
        let statistics = harness.simulator.statistics
        await client.shutdown()
        await harness.stop()
        #expect(error?.status == 400)
        #expect(error?.reason == .cannotCreateChannelConfig)
        #expect(statistics.channelsCreated == 4)
        #expect(SimulatorScenario().channelLimitTotal == 100_000, "ten apps at Apple's limit by default")
    }

    @Test("an unknown channel is ChannelNotRegistered, a malformed one BadChannelId, for read and delete")
    func unknownChannels() async throws {
        let harness = try await SimulatorHarness.start()
        let client = harness.channelClient()
        let unknown = Data(repeating: 7, count: 16).base64EncodedString()
        let readUnknown = await #expect(throws: ChannelManagementError.self) {
            try await client.read(bundleID: Fixtures.topic, channelID: unknown)
        }
        let deleteUnknown = await #expect(throws: ChannelManagementError.self) {
            try await client.delete(bundleID: Fixtures.topic, channelID: unknown)
        }
        let malformed = await #expect(throws: ChannelManagementError.self) {
            try await client.read(bundleID: Fixtures.topic, channelID: "not*base64!")
        }
        // A channel of another app is unknown to this one.
        let created = try await client.create(bundleID: Fixtures.topic, storagePolicy: .noMessageStored)
        _ = try await client.delete(bundleID: Fixtures.topic, channelID: created.value)
        let deleted = await #expect(throws: ChannelManagementError.self) {
            try await client.read(bundleID: Fixtures.topic, channelID: created.value)
        }
        await client.shutdown()
        await harness.stop()
        #expect(readUnknown?.reason == .channelNotRegistered)
        #expect(readUnknown?.status == 400)
        #expect(readUnknown?.requestID != nil)
        #expect(deleteUnknown?.reason == .channelNotRegistered)
        #expect(malformed?.reason == .badChannelId)
        #expect(deleted?.reason == .channelNotRegistered, "a deleted channel is gone")
    }

    @Test("requests the API refuses: a bad storage policy, another push type, no channel ID, a wrong method or path")
    func refusedRequests() async throws {
        let harness = try await SimulatorHarness.start()
        let path = "/1/apps/\(Fixtures.topic)/channels"
        func reason(_ response: HTTP2Response) -> String? { ErrorBody.parse(response.body)?.reason.rawValue }
        let badPolicy = try await harness.rawRequest(
            "POST", path, body: #"{"message-storage-policy":2,"push-type":"LiveActivity"}"#)
        let boolPolicy = try await harness.rawRequest(
            "POST", path, body: #"{"message-storage-policy":true,"push-type":"LiveActivity"}"#)
        let pushType = try await harness.rawRequest(
            "POST", path, body: #"{"message-storage-policy":0,"push-type":"Alert"}"#)
        let notJSON = try await harness.rawRequest("POST", path, body: "policy=0")
        let noChannel = try await harness.rawRequest("GET", path)
        let method = try await harness.rawRequest("PUT", path)
        let badPath = try await harness.rawRequest("GET", "/1/apps/\(Fixtures.topic)/channel-list")
        let noToken = try await HTTP2ClientConnection.connect(
            configuration: HTTP2ClientConfiguration(
                host: "127.0.0.1", port: harness.simulator.port,
                tls: HTTP2ClientTLS(additionalTrustRootsPEMFile: harness.tls.caCertificatePath, trustSystemRoots: false)
            ))
        let unauthenticated = try await noToken.send(
            HTTP2Request(method: "GET", path: "/1/apps/\(Fixtures.topic)/all-channels"))
        await noToken.close()
        await harness.stop()
        #expect((badPolicy.status, reason(badPolicy)) == (400, "BadRequestParams"))
        #expect((boolPolicy.status, reason(boolPolicy)) == (400, "BadRequestParams"))
        #expect((pushType.status, reason(pushType)) == (400, "InvalidPushType"))
        #expect((notJSON.status, reason(notJSON)) == (400, "BadRequestPayload"))
        #expect((noChannel.status, reason(noChannel)) == (400, "MissingChannelId"))
        #expect((method.status, reason(method)) == (405, "MethodNotAllowed"))
        #expect((badPath.status, reason(badPath)) == (404, "BadPath"))
        #expect((unauthenticated.status, reason(unauthenticated)) == (403, "MissingProviderToken"))
    }

    @Test("a channel ID that cannot travel in a header, or a bundle ID with a slash, is refused before sending")
    func refusedLocally() async throws {
        let harness = try await SimulatorHarness.start()
        let client = harness.channelClient()
        let header = await #expect(throws: ChannelManagementError.self) {
            try await client.read(bundleID: Fixtures.topic, channelID: "abc\r\napns-priority: 5")
        }
        let bundle = await #expect(throws: ChannelManagementError.self) {
            try await client.list(bundleID: "../../3/device")
        }
        let received = harness.simulator.statistics.requestsReceived
        await client.shutdown()
        await harness.stop()
        #expect(header?.code == .invalidRequest)
        #expect(bundle?.code == .invalidRequest)
        #expect(received == 0)
    }
}

/// The simulator's broadcast endpoint, `POST /4/broadcasts/apps/<bundleID>` (Apple: *Sending broadcast push
/// notification requests to APNs*).
@Suite("Simulator broadcast sends", .timeLimit(.minutes(1)))
struct SimulatorBroadcastTests {
    static let payload = #"{"aps":{"timestamp":1700000000,"event":"update","content-state":{"score":"2-1"}}}"#

    func broadcast(_ harness: SimulatorHarness, channel: String, extra: [(String, String)] = []) async throws
        -> HTTP2Response
    {
        try await harness.rawRequest(
            "POST", "/4/broadcasts/apps/\(Fixtures.topic)",
            headers: [("apns-channel-id", channel), ("apns-push-type", "liveactivity"), ("apns-priority", "10")]
                + extra,
            body: Self.payload)
    }

    @Test("a send to a created channel is answered 200 and recorded per channel")
    func recorded() async throws {
        let harness = try await SimulatorHarness.start()
        let client = harness.channelClient()
        let channel = try await client.create(bundleID: Fixtures.topic, storagePolicy: .mostRecentMessageStored).value
        await client.shutdown()
        let requestID = UUID().uuidString.lowercased()
        let first = try await self.broadcast(harness, channel: channel, extra: [("apns-request-id", requestID)])
        let second = try await self.broadcast(harness, channel: channel, extra: [("apns-expiration", "1900000000")])
        let statistics = harness.simulator.statistics
        await harness.stop()
        #expect(first.status == 200)
        #expect(first.headers.first("apns-request-id") == requestID)
        #expect(second.status == 200, "a storing channel takes an expiration")
        #expect(statistics.byChannel[channel]?.received == 2)
        #expect(statistics.byChannel[channel]?.delivered == 2)
        #expect(statistics.json.contains("\"broadcasts_received\":2"))
    }

    @Test("a send to an unknown channel is 400 ChannelNotRegistered")
    func unknownChannel() async throws {
        let harness = try await SimulatorHarness.start()
        let response = try await self.broadcast(harness, channel: Data(repeating: 1, count: 16).base64EncodedString())
        let statistics = harness.simulator.statistics
        await harness.stop()
        #expect(response.status == 400)
        #expect(ErrorBody.parse(response.body)?.reason == .channelNotRegistered)
        #expect(statistics.byChannel.isEmpty)
        #expect(statistics.byReason["ChannelNotRegistered"] == 1)
    }

    @Test("Apple's rules apply: push type, duplicate headers, payload, channel header; scenario channels exist")
    func rules() async throws {
        let channel = Data(repeating: 9, count: 16).base64EncodedString()
        let harness = try await SimulatorHarness.start {
            $0.channels = [.init(bundleID: Fixtures.topic, channelID: channel, storagePolicy: 0)]
        }
        let path = "/4/broadcasts/apps/\(Fixtures.topic)"
        func reason(_ response: HTTP2Response) -> String? { ErrorBody.parse(response.body)?.reason.rawValue }
        let preset = try await self.broadcast(harness, channel: channel)
        let alert = try await harness.rawRequest(
            "POST", path, headers: [("apns-channel-id", channel), ("apns-push-type", "alert")], body: Self.payload)
        let noType = try await harness.rawRequest(
            "POST", path, headers: [("apns-channel-id", channel)], body: Self.payload)
        let priority = try await self.broadcast(harness, channel: channel, extra: [("apns-priority", "1")])
        let empty = try await harness.rawRequest(
            "POST", path, headers: [("apns-channel-id", channel), ("apns-push-type", "liveactivity")])
        let noChannel = try await harness.rawRequest(
            "POST", path, headers: [("apns-push-type", "liveactivity")], body: Self.payload)
        await harness.stop()
        #expect(preset.status == 200, "a channel from the scenario exists from the start")
        #expect(reason(alert) == "InvalidPushType")
        #expect(reason(noType) == "MissingPushType")
        #expect(reason(priority) == "DuplicateHeaders", "two apns-priority headers")
        #expect(reason(empty) == "PayloadEmpty")
        #expect(reason(noChannel) == "MissingChannelId")
    }

    @Test("a channel that stores nothing takes only expiration 0; a priority other than 10, 5 or 1 is refused")
    func expirationAndPriority() async throws {
        let channel = Data(repeating: 9, count: 16).base64EncodedString()
        let harness = try await SimulatorHarness.start {
            $0.channels = [.init(bundleID: Fixtures.topic, channelID: channel, storagePolicy: 0)]
        }
        let path = "/4/broadcasts/apps/\(Fixtures.topic)"
        func send(_ headers: [(String, String)]) async throws -> HTTP2Response {
            try await harness.rawRequest(
                "POST", path, headers: [("apns-channel-id", channel), ("apns-push-type", "liveactivity")] + headers,
                body: Self.payload)
        }
        let stored = try await send([("apns-expiration", "1900000000")])
        let zero = try await send([("apns-expiration", "0")])
        let odd = try await send([("apns-priority", "7")])
        await harness.stop()
        #expect(stored.status == 400)
        #expect(ErrorBody.parse(stored.body)?.reason == .badExpirationDate)
        #expect(zero.status == 200)
        #expect(ErrorBody.parse(odd.body)?.reason == .badPriority)
    }
}

/// The scenario file's `channels:` section (docs/simulator.md).
@Suite("Simulator scenario: channels")
struct SimulatorScenarioChannelTests {
    @Test("channels.limit_per_app and channels.existing are read")
    func parsed() throws {
        let scenario = try SimulatorScenario.parse(
            yaml: """
                channels:
                  limit_per_app: 3
                  existing:
                    - { bundle_id: com.example.app, channel_id: "dHN0LXNyY2gtY2hubA==", storage_policy: 1 }
                    - { bundle_id: com.example.app, channel_id: "AAAAAAAAAAAAAAAAAAAAAA==" }
                """, file: "scenario.yaml")
        #expect(scenario.channelLimitPerApp == 3)
        #expect(
            scenario.channels == [
                .init(bundleID: "com.example.app", channelID: "dHN0LXNyY2gtY2hubA==", storagePolicy: 1),
                .init(bundleID: "com.example.app", channelID: "AAAAAAAAAAAAAAAAAAAAAA==", storagePolicy: 0),
            ])
        #expect(SimulatorScenario().channelLimitPerApp == 10_000, "Apple's limit by default")
    }

    @Test(
        "mistakes name their key and line",
        arguments: [
            ("channels:\n  limit_per_app: 20000\n", "channels.limit_per_app"),
            (
                "channels:\n  existing:\n    - { bundle_id: a.b, channel_id: \"not base64!\" }\n",
                "channels.existing[0].channel_id"
            ),
            ("channels:\n  existing:\n    - { channel_id: AAAA }\n", "channels.existing[0]"),
            (
                "channels:\n  existing:\n    - { bundle_id: a.b, channel_id: AAAA, storage_policy: 2 }\n",
                "channels.existing[0].storage_policy"
            ),
            ("channels:\n  limit: 3\n", "channels.limit"),
        ])
    func mistakes(yaml: String, keyPath: String) throws {
        let error = #expect(throws: ScenarioError.self) { try SimulatorScenario.parse(yaml: yaml, file: "s.yaml") }
        #expect(error?.keyPath == keyPath, "\(String(describing: error))")
        #expect(error?.line != nil)
    }
}
