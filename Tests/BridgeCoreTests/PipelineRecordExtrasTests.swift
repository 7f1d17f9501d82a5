import APNSCore
import Foundation
import Logging
import PipelineTestSupport
import Routing
import Testing

@testable import BridgeCore

/// What records carry besides their fields, through the pipeline with in-memory parts: a route's context,
/// forwarded headers, and the key `outcomes.key` chooses (docs/data-contract.md). The end-to-end suite proves the
/// same against Kafka and the APNs simulator.
@Suite("Pipeline: context, forwarded headers, record keys")
struct PipelineRecordExtrasTests {
    static let dead = "dead"
    static let traceparent = Array("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01".utf8)
    /// Bytes that are not UTF-8, forwarded as they are.
    static let correlation: [UInt8] = [0x63, 0xFF, 0xFE, 0x00, 0x80]

    /// The `promo` route of topic `in`: tokens from `tokens`, context from the campaign and the user.
    static func mapper(context: Bool = true) throws -> RouterMapper {
        let route = RouteSpec(
            name: "promo", inputTopic: "in", deviceTokens: "{{tokens}}", topic: "com.example",
            payload: ["aps": ["alert": "Sale"]],
            context: context ? [(name: "campaign", value: "{{campaign}}"), (name: "user", value: "{{user.id}}")] : [])
        return RouterMapper(router: try Router(routes: [route]))
    }

    static func event(
        offset: Int64, _ json: String, key: String? = "customer-42", headers: [(String, [UInt8]?)] = []
    ) -> SourceEvent {
        SourceEvent(
            source: SourceCoordinates(topic: "in", partition: 0, offset: offset, key: key.map { Array($0.utf8) }),
            value: Array(json.utf8), headers: headers, timestampMilliseconds: nil, assignmentGeneration: 1)
    }

    static let headers: [(String, [UInt8]?)] = [
        ("traceparent", Self.traceparent), ("x-correlation-id", Self.correlation), ("other", Array("x".utf8)),
    ]

    /// Runs `events` through the `promo` route with `configuration`; `dead` is answered 410, every other token 200.
    static func run(
        _ events: [SourceEvent], configuration: PipelineConfiguration, context: Bool = true
    ) async throws -> MemorySink {
        let harness = Harness(
            events: events, configuration: configuration, mapper: try Self.mapper(context: context),
            sender: ScriptedSender { token in
                token == Self.dead
                    ? .answered(APNSResponse(status: 410, reason: .unregistered, invalidSinceEpochMilliseconds: 1_000))
                    : .answered(APNSResponse(status: 200, reason: nil, invalidSinceEpochMilliseconds: nil))
            })
        try await harness.runToEnd()
        #expect(harness.source.committed[PartitionID(topic: "in", partition: 0)] == Int64(events.count))
        return harness.sink
    }

    static var forwarding: PipelineConfiguration {
        var configuration = PipelineConfiguration()
        configuration.forwardHeaders = HeaderForwarding(names: ["traceparent", "tracestate", "x-correlation-id"])
        return configuration
    }

    @Test(
        "every outcome and invalid-token record carries the context and the forwarded headers byte for byte; the dead letter its context"
    )
    func contextAndHeadersOnEveryRecord() async throws {
        let sink = try await Self.run(
            [
                Self.event(
                    offset: 0, #"{"tokens":["aa01","dead"],"campaign":"spring","user":{"id":7}}"#, headers: Self.headers
                ),
                Self.event(offset: 1, #"{"campaign":"spring"}"#, headers: Self.headers),
            ], configuration: Self.forwarding)
        let outcomes = sink.records(topic: "pushbridge.outcomes")
        let invalid = sink.records(topic: "pushbridge.invalid-tokens")
        #expect(outcomes.count == 2)
        #expect(invalid.count == 1)
        for record in outcomes + invalid {
            let json = String(decoding: record.value ?? [], as: UTF8.self)
            #expect(json.hasSuffix(#","context":{"campaign":"spring","user":7}}"#), "\(json)")
            #expect(record.headers.map { $0.0 } == ["traceparent", "x-correlation-id"])
            #expect(record.headers.map { $0.1 } == [Self.traceparent, Self.correlation])
        }
        #expect(outcomes.allSatisfy { String(decoding: $0.value ?? [], as: UTF8.self).contains("outcome.v3") })
        #expect(invalid.allSatisfy { String(decoding: $0.value ?? [], as: UTF8.self).contains("invalid-token.v3") })
        let letter = try #require(sink.records(topic: "pushbridge.dead-letters").first)
        #expect(letter.headers.prefix(3).map { $0.0 } == ["traceparent", "x-correlation-id", "other"])
        #expect(letter.headers.last?.0 == "pushbridge-context")
        #expect(letter.headers.last?.1 == Array(#"{"campaign":"spring","user":null}"#.utf8))
    }

    @Test("a context entry the event lacks is null, and the notification goes out as without context")
    func missingContextLeavesTheNotificationUnharmed() async throws {
        let sink = try await Self.run(
            [Self.event(offset: 0, #"{"tokens":["aa01"]}"#)], configuration: PipelineConfiguration())
        let outcome = try #require(sink.values(topic: "pushbridge.outcomes").first)
        #expect(outcome["status"] as? String == "delivered")
        let context = try #require(outcome["context"] as? [String: Any])
        #expect(context["campaign"] is NSNull)
        #expect(context["user"] is NSNull)
    }

    @Test(
        "outcomes.key picks the key of outcome and invalid-token records",
        arguments: [
            (OutcomeKey.deviceToken, ["aa01", "dead"]), (.sourceKey, ["customer-42", "customer-42"]),
            (.context("campaign"), ["spring", "spring"]),
        ])
    func recordKeys(key: OutcomeKey, expected: [String]) async throws {
        var configuration = PipelineConfiguration()
        configuration.outcomeKey = key
        let sink = try await Self.run(
            [Self.event(offset: 0, #"{"tokens":["aa01","dead"],"campaign":"spring"}"#)], configuration: configuration)
        let outcomes = sink.records(topic: "pushbridge.outcomes").sorted {
            ($0.value ?? []).lexicographicallyPrecedes($1.value ?? [])
        }
        let keys = outcomes.map { String(decoding: $0.key ?? [], as: UTF8.self) }
        #expect(Set(keys) == Set(expected))
        let invalid = try #require(sink.records(topic: "pushbridge.invalid-tokens").first)
        let deadOutcome = try #require(
            outcomes.first { String(decoding: $0.value ?? [], as: UTF8.self).contains("410") })
        #expect(invalid.key == deadOutcome.key)
    }

    @Test("outcomes.key: notification_id keys each record by its notification; a null context value leaves no key")
    func notificationIDAndNullKeys() async throws {
        var configuration = PipelineConfiguration()
        configuration.outcomeKey = .notificationID
        let byID = try await Self.run([Self.event(offset: 0, #"{"tokens":["aa01"]}"#)], configuration: configuration)
        let record = try #require(byID.records(topic: "pushbridge.outcomes").first)
        let id = try #require(byID.values(topic: "pushbridge.outcomes").first?["notification_id"] as? String)
        #expect(record.key == Array(id.utf8))

        configuration.outcomeKey = .context("campaign")
        let unkeyed = try await Self.run(
            [Self.event(offset: 0, #"{"tokens":["aa01"],"campaign":null}"#)], configuration: configuration)
        let outcome = try #require(unkeyed.records(topic: "pushbridge.outcomes").first)
        #expect(outcome.key == nil)
    }

    @Test("a source key longer than 1024 bytes is cut to its first 1024 as a record key, so the record fits Kafka")
    func longSourceKeyIsBounded() async throws {
        var configuration = PipelineConfiguration()
        configuration.outcomeKey = .sourceKey
        let key = String(repeating: "k", count: 500_000)
        let sink = try await Self.run(
            [Self.event(offset: 0, #"{"tokens":["aa01"]}"#, key: key)], configuration: configuration)
        #expect(sink.records(topic: "pushbridge.outcomes").first?.key == Array(key.utf8.prefix(1024)))
    }

    @Test(
        "a forwarded header of 1 MB is not forwarded: the records name it in pushbridge-forward-dropped, nothing waits")
    func hugeHeaderIsDropped() async throws {
        let huge = [UInt8](repeating: 0x41, count: 1 << 20)
        let sink = try await Self.run(
            [
                Self.event(offset: 0, #"{"tokens":["aa01"]}"#, headers: [("traceparent", huge), ("tracestate", nil)]),
                Self.event(offset: 1, #"{"tokens":["aa02"]}"#, headers: Self.headers),
            ], configuration: Self.forwarding, context: false)
        let outcomes = sink.records(topic: "pushbridge.outcomes").sorted {
            ($0.key ?? []).lexicographicallyPrecedes($1.key ?? [])
        }
        #expect(outcomes.count == 2)
        #expect(outcomes[0].headers.map { $0.0 } == ["tracestate", "pushbridge-forward-dropped"])
        #expect(outcomes[0].headers.map { $0.1 } == [nil, Array("traceparent".utf8)])
        #expect(outcomes[1].headers.map { $0.1 } == [Self.traceparent, Self.correlation])
        // Forwarding alone changes no record's value: no context, so v1.
        #expect(outcomes.allSatisfy { String(decoding: $0.value ?? [], as: UTF8.self).contains("outcome.v1") })
    }

    @Test("without context and forwarded headers, a notification carries no extras and its records are as before")
    func zeroFeaturePath() async throws {
        let mapping = try #require(
            try Self.mapper(context: false).map(Self.event(offset: 0, #"{"tokens":["aa"]}"#)).first)
        #expect(RecordExtras.of(mapping, forwarded: nil, key: .deviceToken) == nil)
        #expect(RecordExtras.of(mapping, forwarded: nil, key: .sourceKey) == nil)
        // Forwarding configured but the event has none of the headers: still none.
        let pipeline = Pipeline(
            source: MemorySource(events: []), mapper: try Self.mapper(context: false),
            sender: ScriptedSender { _ in
                .answered(APNSResponse(status: 200, reason: nil, invalidSinceEpochMilliseconds: nil))
            }, sink: MemorySink(),
            configuration: Self.forwarding, metrics: BridgeMetrics(), logger: .init(label: "test"))
        #expect(pipeline.forwardedHeaders(of: Self.event(offset: 0, "{}", headers: [("other", [1])])) == nil)

        let sink = try await Self.run(
            [Self.event(offset: 0, #"{"tokens":["aa01","dead"]}"#, headers: Self.headers)],
            configuration: PipelineConfiguration(), context: false)
        for record in sink.records(topic: "pushbridge.outcomes") + sink.records(topic: "pushbridge.invalid-tokens") {
            #expect(record.headers.isEmpty)
            #expect(!String(decoding: record.value ?? [], as: UTF8.self).contains("context"))
        }
        #expect(sink.records(topic: "pushbridge.outcomes").map(\.key).contains(Array("aa01".utf8)))
    }

    @Test("a notification's room counts what its records carry of the context and the forwarded headers")
    func extrasAreCountedInTheRoom() throws {
        let mapping = try #require(
            try Self.mapper().map(Self.event(offset: 0, #"{"tokens":["aa"],"campaign":"spring"}"#)).first)
        let forwarded = HeaderForwarding(names: ["traceparent"]).select(from: Self.headers)
        let extras = try #require(RecordExtras.of(mapping, forwarded: forwarded, key: .context("campaign")))
        let context = #"{"campaign":"spring","user":null}"#.utf8.count
        #expect(extras.contextKey == Array("spring".utf8))
        #expect(extras.recordBytes == 2 * (context + "traceparent".utf8.count + Self.traceparent.count + 6))
    }
}
