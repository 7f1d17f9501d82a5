import Bridge
import BridgeCore
import Configuration
import Foundation
import Kafka
import Prometheus
import Testing

@testable import PushBridgeCLI

/// The demo's summary reports what the bridge did, not what the generator planned: these tests give the tally a
/// bridge whose counts differ from the plan and expect the demo to say so. (DemoCommandTests runs the real demo.)
@Suite("pushbridge demo: the summary's numbers come from the bridge")
struct DemoTallyTests {
    static let topics = OutcomeTopics(outcomes: "o", invalidTokens: "i", deadLetters: "d")
    /// 40 sample events: 2 that no route matches.
    static let plan = DemoEvents(count: 40)

    /// A tally over a fresh registry in which the bridge's metrics counted `unmatched` unmatched events, holding
    /// every record the plan expects when `complete`.
    static func tally(unmatched: Int, complete: Bool = true) -> DemoTally {
        let registry = PrometheusCollectorRegistry()
        let metrics = BridgeMetrics(factory: BridgeMetrics.prometheusFactory(registry: registry))
        for index in 0..<unmatched { metrics.eventUnmatched(topic: index % 2 == 0 ? "demo.orders" : "demo.inbox") }
        let tally = DemoTally(outcomes: Self.topics, registry: registry)
        if complete { tally.add(Self.recordsThePlanExpects()) }
        return tally
    }

    /// One outcome per planned notification, the planned dead letters and invalid tokens.
    static func recordsThePlanExpects() -> [KafkaMessage] {
        func message(_ topic: String, _ offset: Int, value: String = "", headers: [KafkaHeader] = []) -> KafkaMessage {
            KafkaMessage(
                topic: topic, partition: 0, offset: Int64(offset), key: nil, value: Array(value.utf8),
                headers: headers, timestampMilliseconds: nil)
        }
        let outcomes = (0..<Self.plan.notificationCount).map {
            message(Self.topics.outcomes, $0, value: #"{"notification_id":"n\#($0)","status":"delivered"}"#)
        }
        let invalid = (0..<(Self.plan.unregisteredCount + Self.plan.malformedTokenCount)).map {
            message(Self.topics.invalidTokens, $0, value: #"{"notification_id":"n\#($0)"}"#)
        }
        let deadLetters = (0..<Self.plan.deadLetterCount).map {
            message(
                Self.topics.deadLetters, $0,
                headers: [
                    KafkaHeader(name: "pushbridge-source-topic", value: Array("demo.orders".utf8)),
                    KafkaHeader(name: "pushbridge-source-partition", value: Array("0".utf8)),
                    KafkaHeader(name: "pushbridge-source-offset", value: Array("\($0)".utf8)),
                ])
        }
        return outcomes + invalid + deadLetters
    }

    @Test("the unmatched row is the bridge's pushbridge_events_unmatched_total over all topics, not the plan's count")
    func unmatchedRowReadsTheMetric() {
        #expect(Self.plan.unmatchedCount == 2)
        let tally = Self.tally(unmatched: 3)
        let row = tally.rows(tally.counts()).first { $0.name == "unmatched (skipped)" }
        #expect(row?.count == 3)
        #expect(row?.place == "pushbridge_events_unmatched_total")
    }

    @Test(
        "a bridge that miscounts unmatched events fails the demo's check, too few or too many",
        arguments: [0, 1, 3]
    )
    func miscountedUnmatchedIsADiscrepancy(counted: Int) {
        let tally = Self.tally(unmatched: counted)
        #expect(
            tally.discrepancies(Self.plan)
                == ["2 unmatched events expected, \(counted) counted by the bridge (pushbridge_events_unmatched_total)"]
        )
    }

    @Test("every event accounted for, unmatched ones included: no discrepancy")
    func exactCountsPass() {
        let tally = Self.tally(unmatched: 2)
        #expect(tally.discrepancies(Self.plan).isEmpty)
        #expect(tally.accountsFor(Self.plan))
    }

    @Test("the demo keeps waiting while the bridge has counted fewer unmatched events than planned")
    func waitsForUnmatchedEvents() {
        #expect(!Self.tally(unmatched: 1).accountsFor(Self.plan))
    }

    @Test("missing records are discrepancies too, each named")
    func missingRecordsAreDiscrepancies() {
        let discrepancies = Self.tally(unmatched: 2, complete: false).discrepancies(Self.plan)
        #expect(discrepancies.count == 3)
        #expect(discrepancies.contains("\(Self.plan.deadLetterCount) dead letters expected, 0 written"))
    }
}
