import BenchSupport
import Foundation
import Kafka

/// `--urgent-events N` (issue 32, lanes): a trickle of urgent events beside the backlog. They go to a partition of
/// their own (the input topic's last; the backlog is pre-loaded round robin over the others), through a second
/// route, `order-urgent` (the same template, matching `type: urgent`), in the lane `urgent` with `--lanes`. N of
/// them are produced at `--urgent-rate` from the first outcome on, while the backlog drains; N more once it is done,
/// on the idle bridge. The report compares their latencies (produce to `completed_at`).
struct UrgentTrickle {
    let options: BenchOptions
    /// The urgent partition: the one past the backlog's.
    let partition: Int32

    /// Urgent event `index`: event `index` of `events` with `"type":"urgent"`.
    static func event(_ index: Int, events: EventFactory) -> (key: [UInt8], value: [UInt8]) {
        let event = events.event(index)
        let value = String(decoding: event.value, as: UTF8.self)
            .replacingOccurrences(of: #""type":"shipped""#, with: #""type":"urgent""#)
        return (Array("urgent-\(index)".utf8), Array(value.utf8))
    }

    /// Produces urgent events `indices` at the urgent rate, each awaited (so their offsets follow `indices`), and
    /// notes when each was produced.
    func produce(_ indices: Range<Int>, events: EventFactory, producer: KafkaProducer, tally: OutcomeTally)
        async throws
    {
        let started = ContinuousClock.now
        for (position, index) in indices.enumerated() {
            try await Task.sleep(
                until: started + .milliseconds(1000 * position / self.options.urgentRatePerSecond), clock: .continuous)
            let event = Self.event(index, events: events)
            let producedAt = Int64(Date().timeIntervalSince1970 * 1000)
            let delivery = try await producer.send(
                topic: BridgeBench.inputTopic, key: event.key, value: event.value, partition: self.partition)
            if let offset = delivery.offset {
                tally.recordUrgentEvent(offset: offset, producedAtEpochMilliseconds: producedAt)
            }
        }
    }

    /// The `order-urgent` route (indented like ``EventFactory/route(inputTopic:indent:orderingKey:)``'s), in the lane
    /// `urgent` with `--lanes`; then the `lanes:` section.
    func configuration() -> (route: String, lanes: String) {
        var route = EventFactory.route(inputTopic: BridgeBench.inputTopic, indent: 2)
            .replacingOccurrences(of: "- name: order-shipped", with: "- name: order-urgent")
            .replacingOccurrences(of: "match: { type: shipped }", with: "match: { type: urgent }")
        guard self.options.lanes else { return (route, "") }
        route = route.replacingOccurrences(
            of: "match: { type: urgent }", with: "match: { type: urgent }\n    lane: urgent")
        return (route, "lanes:\n  urgent: { max_in_flight: \(self.options.urgentMaxInFlight), expedite: true }\n")
    }

    /// The latencies of the urgent events produced during the backlog and of those produced after it.
    func report(_ tally: OutcomeTally) -> String {
        let latencies = tally.urgentLatenciesMilliseconds
        let count = Int64(self.options.urgentEventCount)
        let during = latencies.filter { $0.key < count }.map(\.value).sorted()
        let idle = latencies.filter { $0.key >= count }.map(\.value).sorted()
        func line(_ sorted: [Double]) -> String {
            guard !sorted.isEmpty else { return "none read" }
            return "p50 \(BridgeBench.format(BridgeBench.percentile(sorted, 0.5), 0)) ms, "
                + "p99 \(BridgeBench.format(BridgeBench.percentile(sorted, 0.99), 0)) ms, "
                + "max \(BridgeBench.format(sorted.last ?? 0, 0)) ms (\(sorted.count) events)"
        }
        var report =
            "  urgent events (\(self.options.lanes ? "lane urgent, max_in_flight \(self.options.urgentMaxInFlight), expedited" : "no lanes: the same line as the backlog"), "
        report += "\(self.options.urgentRatePerSecond)/s):\n"
        report += "    during the backlog: \(line(during))\n"
        report += "    idle bridge:        \(line(idle))\n"
        if let busy = during.last.map({ _ in BridgeBench.percentile(during, 0.99) }),
            let calm = idle.last.map({ _ in BridgeBench.percentile(idle, 0.99) }), calm > 0
        {
            report += "    p99 during / p99 idle: \(BridgeBench.format(busy / calm, 1))\n"
        }
        return report
    }
}
