import APNSCore
import APNSSimulator
import Foundation
import HTTP2
import Kafka
import PipelineTestSupport
import Synchronization
import TestSupport
import TestWaiting
import Testing
import Waiting

@testable import Bridge
@testable import BridgeCore

// Per-key order and coalescing (routes with `ordering_key` / `coalesce`) through `pushbridge run`'s runtime,
// librdkafka's mock cluster and the APNs simulator over TLS + HTTP/2.

@Suite("End to end: per-key order", .serialized)
struct EndToEndOrderingTests {
    /// A Live Activity route keyed by `{{activity.id}}`; each update carries its sequence number.
    static func route(_ world: EndToEnd, coalesce: Bool) -> String {
        """
          - name: live
            input_topic: \(world.inputTopic)
            device_tokens: "{{token}}"
            topic: com.example.app
            push_type: liveactivity
            ordering_key: "{{activity.id}}"
            coalesce: \(coalesce)
            payload:
              aps:
                timestamp: "{{seq}}"
                event: update
                content-state:
                  seq: "{{seq}}"
        """
    }

    static func update(activity: Int, seq: Int, token: String) -> String {
        #"{"activity":{"id":"act-\#(activity)"},"seq":\#(seq),"token":"\#(token)"}"#
    }

    /// Which update each notification is: its `seq`, by `notification_id`. The simulator sees apns-ids; the outcome
    /// records say which event (partition, offset) each one is, and in partition p the k-th of `events` (as produced
    /// by ``produceInOrder(_:_:)``) has offset k.
    static func sequenceByID(_ outcomes: [Results.Outcome], events: [(Int32, String, String)]) throws -> [String: Int] {
        var eventsByPartition: [Int: [String]] = [:]
        for (partition, _, value) in events { eventsByPartition[Int(partition), default: []].append(value) }
        var sequenceByID: [String: Int] = [:]
        for outcome in outcomes {
            let place = try #require(outcome.sourcePlace)
            let value = try #require(eventsByPartition[place.partition]?[place.offset])
            let object = try #require(try JSONSerialization.jsonObject(with: Data(value.utf8)) as? [String: Any])
            sequenceByID[outcome.notificationID] = object["seq"] as? Int
        }
        return sequenceByID
    }

    /// `updates` updates of each of `keys` activities, interleaved over the keys as a stream of many activities looks:
    /// (partition, Kafka key, value); activity `a` goes to partition `a % 4`, to device `token(tokenBase + a)`.
    static func interleaved(keys: Int, updates: Int, tokenBase: Int) -> [(Int32, String, String)] {
        (0..<updates).flatMap { seq in
            (0..<keys).map { activity in
                let token = EndToEnd.token(tokenBase + activity)
                return (Int32(activity % 4), "act-\(activity)", Self.update(activity: activity, seq: seq, token: token))
            }
        }
    }

    /// Produces `events` (partition, key, value) in this order: each is handed to librdkafka before the next, so
    /// the offsets of one partition follow the list. Returns how many went to each partition.
    static func produceInOrder(_ world: EndToEnd, _ events: [(Int32, String, String)]) async throws -> [Int32: Int64] {
        var configuration = KafkaProducerConfiguration(bootstrapServers: world.broker.bootstrapServers)
        configuration.linger = .milliseconds(2)
        configuration.properties = ["log_level": "0"]
        let producer = try KafkaProducer(configuration: configuration, logger: quietLogger()).running()
        let reports = AsyncCondition((done: 0, failures: [String]()))
        var counts: [Int32: Int64] = [:]
        for (partition, key, value) in events {
            counts[partition, default: 0] += 1
            await producer.send(
                topic: world.inputTopic, key: Array(key.utf8), value: Array(value.utf8), partition: partition,
                handler: DeliveryBox { result in
                    reports.withLock { reports in
                        reports.done += 1
                        if case .failure(let error) = result { reports.failures.append("\(error)") }
                    }
                })
        }
        let reported = await reports.wait(deadline: .now + .seconds(30)) { $0.done == events.count ? () : nil }
        await producer.close()
        guard case .satisfied = reported else { throw TimedOut(what: "delivery reports") }
        #expect(reports.read { $0.failures } == [])
        return counts
    }

    @Test(
        "random latency and 503s, many updates per key over four partitions: each device receives its key's updates in input order, keys in flight together"
    )
    func orderUnderJitterAndFaults() async throws {
        let keys = 24
        let updates = 25
        var scenario = SimulatorScenario()
        scenario.latency = .milliseconds(1)
        scenario.latencyJitter = .milliseconds(25)
        scenario.serviceUnavailableRate = 0.15
        scenario.seed = 15
        scenario.receiveLogLimit = 100_000
        try await withEndToEnd(partitions: 4, scenario: scenario) { world in
            let events = Self.interleaved(keys: keys, updates: updates, tokenBase: 0x1000)
            var inputOrder: [String: [Int]] = [:]  // device token -> sequence numbers in input order
            for activity in 0..<keys { inputOrder[EndToEnd.token(0x1000 + activity)] = Array(0..<updates) }
            let perPartition = try await Self.produceInOrder(world, events)
            let path = try world.configuration(
                maxInFlight: 200, maxAttempts: 20, connections: 1, routes: Self.route(world, coalesce: false))
            let count = keys * updates
            try await world.withBridge(configurationPath: path) { _ in
                _ = try await world.results { $0.notificationIDs.count >= count }
            }
            let results = try await world.results { $0.notificationIDs.count >= count }
            #expect(results.outcomes.count == count)
            #expect(results.outcomes.allSatisfy { $0.status == "delivered" })

            // What each notification is: its sequence number, through its source coordinates.
            let received = world.simulator.receivedRequests
            #expect(received.count == world.simulator.statistics.requestsReceived, "the receive log is incomplete")
            let sequenceByID = try Self.sequenceByID(results.outcomes, events: events)

            var retried = 0
            for (token, expected) in inputOrder {
                let requests = received.filter { $0.deviceToken == token }
                let sequence = requests.map { sequenceByID[$0.apnsID ?? ""] ?? -1 }
                var runs: [Int] = []
                for (index, seq) in sequence.enumerated() {
                    if runs.last == seq {
                        retried += 1
                        continue
                    }
                    runs.append(seq)
                    // The next update went out only after the previous one's final answer (200, after its retries).
                    if index > 0 {
                        #expect(
                            requests[index - 1].status == 200,
                            "token \(token.suffix(4)): #\(seq) sent before #\(sequence[index - 1]) was answered 200")
                    }
                }
                #expect(runs == expected, "token \(token.suffix(4)) received \(runs)")
            }
            let statistics = world.simulator.statistics
            #expect((statistics.byStatus[503] ?? 0) > count / 20, "too few 503s to prove retries keep the order")
            #expect(retried == statistics.byStatus[503] ?? 0)
            let concurrent = world.simulator.transportStatistics.maxConcurrentStreamsSeen
            #expect(
                concurrent >= 4,
                "at most \(concurrent) streams at once on the one connection: keys did not go out concurrently")
            #expect(try await world.committed() == perPartition)
        }
    }

    @Test(
        "coalesce: a backlog of updates for one activity becomes a few sends; every update has one outcome; the newest is delivered"
    )
    func coalescingBacklog() async throws {
        let count = 150
        var scenario = SimulatorScenario()
        scenario.latency = .milliseconds(150)
        scenario.receiveLogLimit = 10_000
        try await withEndToEnd(partitions: 4, scenario: scenario) { world in
            let token = EndToEnd.token(0xC0A1)
            let events = (0..<count).map { seq in (Int32(2), "act-7", Self.update(activity: 7, seq: seq, token: token))
            }
            let perPartition = try await Self.produceInOrder(world, events)
            let path = try world.configuration(maxInFlight: 1000, routes: Self.route(world, coalesce: true))
            let metrics = try await world.withBridge(configurationPath: path) { started in
                _ = try await world.results { $0.notificationIDs.count >= count }
                return try await httpGet(port: started.adminPort, path: "/metrics").1
            }
            let results = try await world.results { $0.notificationIDs.count >= count }
            #expect(results.outcomes.count == count, "every update has exactly one outcome")
            #expect(results.notificationIDs.count == count)
            let offsets = Dictionary(
                uniqueKeysWithValues: results.outcomes.map { ($0.notificationID, $0.sourcePlace?.offset ?? -1) })
            let sends = world.simulator.receivedRequests.filter { $0.deviceToken == token }
            #expect(sends.count <= count / 10, "\(sends.count) sends for \(count) updates")
            #expect(world.simulator.statistics.byToken[token]?.received == sends.count)
            let newest = try #require(results.outcomes.first { offsets[$0.notificationID] == count - 1 })
            #expect(newest.status == "delivered", "the newest update must be delivered")
            #expect(sends.last?.apnsID == newest.notificationID)
            var superseded = 0
            for outcome in results.outcomes {
                switch outcome.status {
                case "delivered":
                    #expect(sends.contains { $0.apnsID == outcome.notificationID })
                    #expect(outcome.json["schema"] == "pushbridge.outcome.v1")
                case "superseded":
                    superseded += 1
                    #expect(outcome.json["schema"] == "pushbridge.outcome.v2")
                    let replacement = try #require(outcome.json["superseded_by"])
                    #expect((offsets[replacement] ?? -1) > (offsets[outcome.notificationID] ?? .max))
                    #expect(!sends.contains { $0.apnsID == outcome.notificationID }, "a superseded update was sent")
                default:
                    Issue.record("unexpected status \(outcome.status)")
                }
            }
            #expect(superseded == count - sends.count)
            #expect(
                metrics.contains(
                    #"pushbridge_notifications_total{route="live",status="superseded",reason=""} \#(superseded)"#))
            let report = try await RecordSchemas.validate(
                results.outcomes.map { ($0.status == "superseded" ? .outcomeV2 : .outcome, $0.raw) })
            #expect(report.problems == [])
            #expect(try await world.committed() == perPartition)
        }
    }
}
