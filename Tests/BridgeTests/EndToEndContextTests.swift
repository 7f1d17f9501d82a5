import APNSSimulator
import Foundation
import Kafka
import TestSupport
import TestWaiting
import Testing

// Issue 33, "Outcomes a data team can use without a join": `pushbridge run` as a child process, librdkafka's mock
// cluster and the APNs simulator. Events of a campaign with a `traceparent` header: every outcome and invalid-token
// record carries the campaign in `context` and the same `traceparent`, is keyed by the campaign
// (`outcomes.key: context.campaign`), and validates against the v3 schemas; a context entry that does not render is
// null and its notification is delivered all the same; a 1 MB header, non-UTF-8 header bytes and a context value
// over its bound each end as docs/data-contract.md says, and nothing holds the partitions up.

@Suite("End to end: context, forwarded headers, record keys", .serialized, .timeLimit(.minutes(5)))
struct EndToEndContextTests {
    static let unregistered = EndToEnd.token(0xdead)
    /// The event whose `traceparent` is 1 MB.
    static let hugeHeaderEvent = 9

    /// One event of the test and what its records must carry.
    struct Event {
        var index: Int
        var value: String
        var campaign: String?
        var headers: [KafkaHeader]
        /// Notifications it makes (0: a dead letter).
        var notifications: Int
        var invalidTokens: Int
    }

    static func traceparent(_ index: Int) -> [UInt8] {
        Array(String(format: "00-%032x-%016x-01", 0x4bf9_2f35_77b3 + index, 0x00f0_67aa + index).utf8)
    }

    /// Not UTF-8 (a lone continuation byte, an invalid lead byte, a NUL), so it is forwarded as bytes.
    static func correlation(_ index: Int) -> [UInt8] { [0x80, 0xFF, 0x00, UInt8(index)] }

    /// 40 events of eight kinds, in turn: good ones (one with two tokens), an unregistered token, a malformed token,
    /// no token at all (a dead letter), no campaign, and a campaign too long for the context.
    static func events() -> [Event] {
        (0..<40).map { index in
            let campaign = "c-\(index % 3)"
            var event = Event(
                index: index, value: "", campaign: campaign,
                headers: [
                    KafkaHeader(name: "traceparent", value: Self.traceparent(index)),
                    KafkaHeader(name: "x-correlation-id", value: Self.correlation(index)),
                    KafkaHeader(name: "other", value: Array("not forwarded".utf8)),
                ], notifications: 1, invalidTokens: 0)
            if index == Self.hugeHeaderEvent {
                event.headers[0] = KafkaHeader(name: "traceparent", value: [UInt8](repeating: 0x74, count: 1 << 20))
            }
            func value(_ tokens: [String], campaign: String? = campaign) -> String {
                let list = tokens.map { "\"\($0)\"" }.joined(separator: ",")
                let field = campaign.map { #","campaign":"\#($0)""# } ?? ""
                return #"{"kind":"alert","text":"sale","user":{"id":\#(index)},"tokens":[\#(list)]\#(field)}"#
            }
            switch index % 8 {
            case 0:
                event.value = value([EndToEnd.token(index), EndToEnd.token(1000 + index)])
                event.notifications = 2
            case 3:
                event.value = value([Self.unregistered])
                event.invalidTokens = 1
            case 4:
                event.value = value(["zz-not-a-token"])
                event.invalidTokens = 1
            case 5:
                event.value = #"{"kind":"alert","text":"no tokens","campaign":"\#(campaign)"}"#
                event.notifications = 0
            case 6:
                event.value = value([EndToEnd.token(index)], campaign: nil)
                event.campaign = nil
            case 7:
                event.value = value([EndToEnd.token(index)], campaign: String(repeating: "x", count: 2_000))
                event.campaign = nil
            default:
                event.value = value([EndToEnd.token(index)])
            }
            return event
        }
    }

    @Test(
        "every record carries the campaign and the same traceparent, keyed by the campaign, valid against the v3 schemas; hostile headers and contexts end as documented"
    )
    func contextHeadersAndKeys() async throws {
        var scenario = SimulatorScenario()
        scenario.unregisteredTokens = [Self.unregistered: 1_763_000_000_000]
        try await withEndToEnd(scenario: scenario) { world in
            let events = Self.events()
            let records = events.map { HostileRecord(value: Array($0.value.utf8), headers: $0.headers) }
            let perPartition = try await EndToEndHostileTests.produce(records, to: world)
            let routes = """
                  - name: campaigns
                    input_topic: \(world.inputTopic)
                    match: { kind: alert }
                    device_tokens: "{{tokens}}"
                    topic: com.example.app
                    context:
                      campaign: "{{campaign}}"
                      user: "{{user.id}}"
                    payload:
                      aps:
                        alert: "{{text}}"
                """
            let adminPort = try freeLoopbackPort()
            let path = try world.configuration(
                routes: routes, adminListen: "127.0.0.1:\(adminPort)", name: "context",
                outcomes: ["key: context.campaign", "forward_headers: [traceparent, tracestate, x-correlation-id]"])
            let bridge = try BridgeProcess.start(
                configurationPath: path, log: world.directory.appendingPathComponent("context.log"))
            defer { if bridge.process.isRunning { bridge.kill(signal: SIGKILL) } }

            let expectedOutcomes = events.reduce(0) { $0 + $1.notifications }
            let expectedInvalid = events.reduce(0) { $0 + $1.invalidTokens }
            let expectedDead = events.filter { $0.notifications == 0 }.count
            let results = try await world.results(timeout: .seconds(90)) { results in
                results.outcomes.count >= expectedOutcomes && results.invalidTokens.count >= expectedInvalid
                    && results.deadLetters.count >= expectedDead
            }
            #expect(bridge.process.isRunning, "the bridge died; see context.log")
            let (ready, body) = try await httpGet(port: adminPort, path: "/readyz")
            #expect(ready == 200, "\(body)")
            bridge.kill(signal: SIGTERM)
            #expect(await bridge.waitForExit() == 0)
            #expect(try await world.committed() == perPartition, "every partition committed to its end")

            #expect(results.outcomes.count == expectedOutcomes)
            #expect(results.invalidTokens.count == expectedInvalid)
            #expect(results.deadLetters.count == expectedDead)
            // The produce helper puts event i at partition i % 4, offset i / 4.
            func event(partition: Int, offset: Int) throws -> Event {
                try #require(events[safe: offset * 4 + partition])
            }

            for outcome in results.outcomes {
                let place = try #require(outcome.sourcePlace)
                let event = try event(partition: place.partition, offset: place.offset)
                try Self.check(
                    value: outcome.raw, key: outcome.key.map { Array($0.utf8) }, headers: outcome.headers, of: event,
                    schema: "pushbridge.outcome.v3")
                // A context that does not render leaves the notification unharmed.
                if event.index % 8 == 6 || event.index % 8 == 7 || event.index == Self.hugeHeaderEvent {
                    #expect(outcome.status == "delivered", "event \(event.index)")
                }
            }
            for message in results.invalidTokenMessages {
                let object = try #require(
                    try JSONSerialization.jsonObject(with: Data(message.value ?? [])) as? [String: Any])
                let source = try #require(object["source"] as? [String: Any])
                let event = try event(
                    partition: try #require(source["partition"] as? Int), offset: try #require(source["offset"] as? Int)
                )
                try Self.check(
                    value: message.value ?? [], key: message.key, headers: message.headers, of: event,
                    schema: "pushbridge.invalid-token.v3")
            }
            for letter in results.deadLetters {
                let header = { (name: String) in letter.headers.first { $0.name == name }?.value }
                let partition = Int(String(decoding: header("pushbridge-source-partition") ?? [], as: UTF8.self))
                let offset = Int(String(decoding: header("pushbridge-source-offset") ?? [], as: UTF8.self))
                let event = try event(partition: try #require(partition), offset: try #require(offset))
                let contextHeader = try #require(header("pushbridge-context"))
                let context = try #require(
                    try JSONSerialization.jsonObject(with: Data(contextHeader)) as? [String: Any])
                #expect(context["campaign"] as? String == event.campaign)
                #expect(context["user"] is NSNull, "the dead letter's event has no user")
                // A dead letter is the source event unchanged: every source header stays.
                #expect(header("traceparent") == Self.traceparent(event.index))
                #expect(header("other") == Array("not forwarded".utf8))
            }

            let report = try await RecordSchemas.validate(
                results.outcomes.map { (.outcomeV3, $0.raw) } + results.invalidTokenValues.map { (.invalidTokenV3, $0) }
                    + results.deadLetters.map { (.deadLetterHeadersV2, Self.headerObject($0.headers)) })
            #expect(report.problems.isEmpty, "schema problems: \(report.problems)")
            #expect(report.exitStatus == 0)
        }
    }

    /// Checks an outcome or invalid-token record of `event`: its schema, its context, its key (the campaign, or
    /// none when the campaign is null) and its headers (exactly the forwarded ones, byte for byte).
    static func check(value: [UInt8], key: [UInt8]?, headers: [KafkaHeader], of event: Event, schema: String) throws {
        let object = try #require(try JSONSerialization.jsonObject(with: Data(value)) as? [String: Any])
        #expect(object["schema"] as? String == schema)
        let context = try #require(object["context"] as? [String: Any])
        #expect(context["campaign"] as? String == event.campaign, "event \(event.index)")
        if event.campaign == nil { #expect(context["campaign"] is NSNull) }
        #expect(context["user"] as? Int == event.index)
        #expect(key == event.campaign.map { Array($0.utf8) }, "event \(event.index)")
        let expected: [(String, [UInt8]?)] =
            event.index == Self.hugeHeaderEvent
            ? [
                ("x-correlation-id", Self.correlation(event.index)),
                ("pushbridge-forward-dropped", Array("traceparent".utf8)),
            ]
            : [("traceparent", Self.traceparent(event.index)), ("x-correlation-id", Self.correlation(event.index))]
        #expect(headers.map(\.name) == expected.map { $0.0 }, "event \(event.index)")
        #expect(headers.map(\.value) == expected.map { $0.1 }, "event \(event.index)")
    }

    /// A dead letter's headers as the JSON object the headers schema describes (values as UTF-8 text).
    static func headerObject(_ headers: [KafkaHeader]) -> [UInt8] {
        var object: [String: String] = [:]
        for header in headers { object[header.name] = String(decoding: header.value ?? [], as: UTF8.self) }
        return Array((try? JSONSerialization.data(withJSONObject: object)) ?? Data())
    }
}

extension Array {
    fileprivate subscript(safe index: Int) -> Element? {
        self.indices.contains(index) ? self[index] : nil
    }
}
