import APNSClient
import APNSSimulator
import Foundation
import Kafka
import TestSupport
import Testing

@testable import Bridge
@testable import BridgeCore

// Broadcast routes end to end: `pushbridge run` against librdkafka's mock cluster and the APNs simulator over
// TLS + HTTP/2, sending Live Activity updates to channels (issue 15, part 3; docs/apns-client.md).

@Suite("End to end: broadcast", .serialized, .timeLimit(.minutes(2)))
struct EndToEndBroadcastTests {
    /// A channel that exists from the simulator's start (its scenario's `channels.existing`), storing nothing.
    static let presetChannel = Data(repeating: 7, count: 16).base64EncodedString()
    /// A well-formed channel that was never created.
    static let unknownChannel = Data(repeating: 1, count: 16).base64EncodedString()

    static let routes = """
          - name: scores
            input_topic: {topic}
            match: { kind: score }
            channel_id: "{{match.channel}}"
            topic: com.example.app
            push_type: liveactivity
            payload:
              aps:
                timestamp: "{{ts}}"
                event: update
                content-state:
                  score: "{{score}}"
          - name: alerts
            input_topic: {topic}
            match: { kind: alert }
            device_tokens: "{{tokens}}"
            topic: com.example.app
            payload:
              aps:
                alert: "{{text}}"
        """

    static func score(channel: String, _ score: String, ts: Int) -> String {
        #"{"kind":"score","match":{"channel":"\#(channel)"},"score":"\#(score)","ts":\#(ts)}"#
    }

    @Test(
        "events become one broadcast each with Apple's path and headers, outcomes carry the channel; an unknown channel is rejected, a malformed one dead-lettered"
    )
    func broadcasts() async throws {
        var scenario = SimulatorScenario()
        scenario.channels = [.init(bundleID: "com.example.app", channelID: Self.presetChannel, storagePolicy: 0)]
        try await withEndToEnd(scenario: scenario) { world in
            let path = try world.configuration(
                routes: Self.routes.replacingOccurrences(of: "{topic}", with: world.inputTopic))

            // A second channel, made through the simulator's channel management API with the bridge's own key.
            let key = try SigningKey.load(
                p8Path: world.directory.appendingPathComponent("AuthKey.p8").path, keyID: EndToEnd.keyID,
                teamID: EndToEnd.teamID)
            let management = ChannelManagementClient(
                configuration: APNSClientConfiguration(
                    endpoint: .init(host: "127.0.0.1", port: world.simulator.port),
                    authentication: .token(ProviderTokenSource(key: key)), requestTimeout: .seconds(10),
                    connectTimeout: .seconds(5), additionalTrustRootsPEMFile: world.tls.caCertificatePath,
                    trustSystemRoots: false))
            let createdChannel = try await management.create(
                bundleID: "com.example.app", storagePolicy: .mostRecentMessageStored
            ).value
            await management.shutdown()

            var events: [String] = []
            events += (0..<6).map { Self.score(channel: Self.presetChannel, "\($0)-0", ts: 1_700_000_000 + $0) }
            events += (0..<4).map { Self.score(channel: createdChannel, "0-\($0)", ts: 1_700_000_100 + $0) }
            events += (0..<2).map { Self.score(channel: Self.unknownChannel, "9-\($0)", ts: 1_700_000_200 + $0) }
            let malformed = ["not base64!", "", #"ab\ncd=="#]
            events += malformed.map { Self.score(channel: $0, "x", ts: 1) }
            events.append(EndToEnd.alert([EndToEnd.token(1)]))
            let perPartition = try await world.produce(events)
            let expectedOutcomes = 6 + 4 + 2 + 1

            try await world.withBridge(configurationPath: path) { _ in
                _ = try await world.results { $0.outcomes.count >= expectedOutcomes && $0.deadLetters.count >= 3 }
            }
            let results = try await world.results {
                $0.outcomes.count >= expectedOutcomes && $0.deadLetters.count >= 3
            }
            let statistics = world.simulator.statistics

            // What the simulator received: one broadcast request per event, as Apple's page describes it.
            #expect(statistics.recentBroadcasts.count == 12)
            for request in statistics.recentBroadcasts {
                #expect(request.path == "/4/broadcasts/apps/com.example.app")
                #expect(request.pushType == "liveactivity")
                #expect(request.topic == nil, "Apple's broadcast request has no apns-topic")
                #expect(request.priority == "10")
                #expect(request.expiration == "0", "required on a broadcast; 0 is what a storing-nothing channel takes")
                #expect(request.messageID == nil && request.collapseID == nil)
                #expect(request.requestID.map { UUID(uuidString: $0) != nil } == true)
            }
            #expect(statistics.byChannel[Self.presetChannel]?.received == 6)
            #expect(statistics.byChannel[Self.presetChannel]?.delivered == 6)
            #expect(statistics.byChannel[createdChannel]?.delivered == 4)
            #expect(statistics.byReason["ChannelNotRegistered"] == 2)
            #expect(statistics.byToken[EndToEnd.token(1)]?.delivered == 1, "device routes work alongside")

            // Outcomes: the channel instead of a token, v2, keyed by the channel; the request id is the outcome's.
            let broadcasts = results.outcomes.filter { $0.json["schema"] == "pushbridge.outcome.v2" }
            #expect(broadcasts.count == 12)
            #expect(Set(broadcasts.map(\.notificationID)) == Set(statistics.recentBroadcasts.compactMap(\.requestID)))
            for outcome in broadcasts {
                #expect(outcome.json["device_token"] == nil, "null")
                #expect(outcome.key == outcome.json["channel_id"])
                #expect(outcome.json["push_type"] == "liveactivity")
                #expect(outcome.json["route"] == "scores")
            }
            func outcomes(_ channel: String) -> [Results.Outcome] {
                broadcasts.filter { $0.json["channel_id"] == channel }
            }
            #expect(outcomes(Self.presetChannel).map(\.status) == Array(repeating: "delivered", count: 6))
            #expect(outcomes(createdChannel).map(\.status) == Array(repeating: "delivered", count: 4))
            #expect(outcomes(Self.unknownChannel).map(\.status) == ["rejected", "rejected"])
            #expect(outcomes(Self.unknownChannel).allSatisfy { $0.reason == "ChannelNotRegistered" })
            #expect(outcomes(Self.unknownChannel).allSatisfy { $0.json["http_status"] == "400" })
            let device = results.outcomes.filter { $0.json["schema"] == "pushbridge.outcome.v1" }
            #expect(device.map(\.token) == [EndToEnd.token(1)])
            #expect(results.invalidTokens.isEmpty, "a broadcast never makes an invalid-token record")

            // Malformed channel IDs: dead letters naming the route and the field.
            #expect(results.deadLetters.count == 3)
            for letter in results.deadLetters {
                let error =
                    letter.headers.first { $0.name == DeadLetter.Header.error }?.value
                    .map { String(decoding: $0, as: UTF8.self) } ?? ""
                #expect(error.hasPrefix("route scores: channel_id: "), "\(error)")
            }

            let report = try await RecordSchemas.validate(
                broadcasts.map { (.outcomeV2, $0.raw) } + device.map { (.outcome, $0.raw) })
            #expect(report.problems == [])
            #expect(try await world.committed() == perPartition)
        }
    }
}
