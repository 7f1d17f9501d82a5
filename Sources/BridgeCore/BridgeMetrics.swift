import APNSCore
import CoreMetrics
import Metrics
import Synchronization

/// The metrics of docs/operations.md, "Metrics", created through swift-metrics so any backend works; `pushbridge run` bootstraps
/// swift-prometheus and serves it on `/metrics`.
///
/// Labelled metric objects are created once per label combination and cached, never per message. No label
/// ever carries a device token or a message id.
package final class BridgeMetrics: Sendable {
    private let factory: any MetricsFactory

    /// `pushbridge_in_flight{lane="default"}`: notifications between consumption and their acknowledged outcome, of
    /// the default lane (all of them without lanes; ``inFlightGauges(lane:)`` for the others).
    package let inFlight: Gauge
    /// `pushbridge_in_flight_bytes{lane="default"}`: the bytes they hold (events, payloads, records), against
    /// `kafka.max_in_flight_bytes` (or the default lane's share of it).
    package let inFlightBytes: Gauge
    /// `pushbridge_unpublished_records`: records Kafka failed that are being published again.
    package let unpublishedRecords: Gauge
    /// `pushbridge_apns_connections`: open HTTP/2 connections to APNs.
    package let apnsConnections: Gauge
    /// `pushbridge_halted`: 1 while a systemic fault stops the line, else 0.
    package let halted: Gauge
    /// `pushbridge_ordering_max_waiting`: the notifications waiting in the deepest per-key line (routes with
    /// `ordering_key`), behind its one in flight: a hot key shows here; at ``PipelineConfiguration/maxWaitingPerKey``
    /// its partition is held back.
    package let orderingMaxWaiting: Gauge
    /// `pushbridge_apns_request_duration_seconds`: one observation per APNs answer.
    package let apnsRequestDuration: Timer

    private let consumed = Mutex<[String: Counter]>([:])
    private let unmatched = Mutex<[String: Counter]>([:])
    private let notifications = Mutex<[NotificationKey: Counter]>([:])
    private let deadLetters = Mutex<[String: Counter]>([:])
    private let invalidTokens = Mutex<[String: Counter]>([:])
    private let feedbackTokens = Mutex<[String: Counter]>([:])
    private let feedbackSkipped = Mutex<[String: Counter]>([:])
    private let feedbackPollFailures = Mutex<[String: Counter]>([:])
    private let lag = Mutex<[LagKey: Gauge]>([:])
    private let oldestUnfinished = Mutex<[LagKey: Gauge]>([:])
    private let laneInFlight = Mutex<[String: (count: Gauge, bytes: Gauge)]>([:])
    private let heldBack = Mutex<[String: Gauge]>([:])

    private struct NotificationKey: Hashable {
        var route: String
        var status: String
        var reason: String
    }

    private struct LagKey: Hashable {
        var topic: String
        var partition: Int32
    }

    /// The duration histogram's buckets, in seconds: APNs answers in milliseconds when healthy and in
    /// seconds when it is not.
    package static let requestDurationBuckets: [Duration] = [
        .milliseconds(1), .milliseconds(2), .milliseconds(5), .milliseconds(10), .milliseconds(25),
        .milliseconds(50), .milliseconds(100), .milliseconds(250), .milliseconds(500), .seconds(1),
        .milliseconds(2500), .seconds(5), .seconds(10),
    ]

    /// Creates the metrics through `factory` (tests pass their own; production passes the bootstrapped one).
    package init(factory: any MetricsFactory = MetricsSystem.factory) {
        self.factory = factory
        self.inFlight = Gauge(label: "pushbridge_in_flight", dimensions: [("lane", "default")], factory: factory)
        self.inFlightBytes = Gauge(
            label: "pushbridge_in_flight_bytes", dimensions: [("lane", "default")], factory: factory)
        self.unpublishedRecords = Gauge(label: "pushbridge_unpublished_records", factory: factory)
        self.apnsConnections = Gauge(label: "pushbridge_apns_connections", factory: factory)
        self.halted = Gauge(label: "pushbridge_halted", factory: factory)
        self.orderingMaxWaiting = Gauge(label: "pushbridge_ordering_max_waiting", factory: factory)
        self.apnsRequestDuration = Timer(
            label: "pushbridge_apns_request_duration_seconds",
            preferredDisplayUnit: .seconds,
            factory: factory
        )
        self.halted.record(0)
        self.inFlight.record(0)
        self.inFlightBytes.record(0)
        self.unpublishedRecords.record(0)
        self.apnsConnections.record(0)
        self.orderingMaxWaiting.record(0)
    }

    /// The `pushbridge_in_flight{lane}` and `pushbridge_in_flight_bytes{lane}` gauges of `lane`, made once per lane
    /// (at 0); the default lane's are ``inFlight`` and ``inFlightBytes``.
    package func inFlightGauges(lane: String) -> (count: Gauge, bytes: Gauge) {
        if lane == "default" { return (self.inFlight, self.inFlightBytes) }
        return self.laneInFlight.withLock { gauges in
            if let existing = gauges[lane] { return existing }
            let made = (
                count: Gauge(label: "pushbridge_in_flight", dimensions: [("lane", lane)], factory: self.factory),
                bytes: Gauge(label: "pushbridge_in_flight_bytes", dimensions: [("lane", lane)], factory: self.factory)
            )
            made.count.record(0)
            made.bytes.record(0)
            gauges[lane] = made
            return made
        }
    }

    /// Records how many partitions wait for room in `lane` (held back), every few seconds.
    package func heldBackPartitions(lane: String, count: Int) {
        let gauge = self.heldBack.withLock { gauges in
            if let existing = gauges[lane] { return existing }
            let made = Gauge(
                label: "pushbridge_lane_held_back_partitions", dimensions: [("lane", lane)], factory: self.factory)
            gauges[lane] = made
            return made
        }
        gauge.record(count)
    }

    /// Counts `count` events consumed from `topic`.
    package func eventsConsumed(topic: String, count: Int = 1) {
        Self.counter(in: self.consumed, key: topic) {
            Counter(label: "pushbridge_events_consumed_total", dimensions: [("topic", topic)], factory: self.factory)
        }.increment(by: count)
    }

    /// Counts an event of `topic` that no route matched.
    package func eventUnmatched(topic: String) {
        Self.counter(in: self.unmatched, key: topic) {
            Counter(label: "pushbridge_events_unmatched_total", dimensions: [("topic", topic)], factory: self.factory)
        }.increment()
    }

    /// Counts a notification's final outcome; `reason` is Apple's reason string, empty when delivered. A reason
    /// that is neither Apple's nor the bridge's own is counted as `Unknown`: a server can answer any string,
    /// and every distinct label value is a new time series.
    package func notification(route: String, status: OutcomeStatus, reason: String?) {
        let key = NotificationKey(route: route, status: status.rawValue, reason: Self.reasonLabel(reason))
        Self.counter(in: self.notifications, key: key) {
            Counter(
                label: "pushbridge_notifications_total",
                dimensions: [("route", key.route), ("status", key.status), ("reason", key.reason)],
                factory: self.factory
            )
        }.increment()
    }

    /// Counts a dead letter for `route` (empty when the event failed before any route).
    package func deadLetter(route: String) {
        Self.counter(in: self.deadLetters, key: route) {
            Counter(label: "pushbridge_dead_letters_total", dimensions: [("route", route)], factory: self.factory)
        }.increment()
    }

    /// Counts an invalid-token record for `reason`.
    package func invalidToken(reason: String, count: Int = 1) {
        Self.counter(in: self.invalidTokens, key: reason) {
            Counter(label: "pushbridge_invalid_tokens_total", dimensions: [("reason", reason)], factory: self.factory)
        }.increment(by: count)
    }

    /// Counts `count` tokens of the feedback service of `app` published (acknowledged by Kafka) as invalid-token
    /// records.
    package func feedbackTokensPublished(app: String, count: Int) {
        Self.counter(in: self.feedbackTokens, key: app) {
            Counter(label: "pushbridge_feedback_tokens_total", dimensions: [("app", app)], factory: self.factory)
        }.increment(by: count)
    }

    /// Counts a feedback tuple of `app` skipped because its token is not 32 bytes.
    package func feedbackTokenSkipped(app: String, count: Int = 1) {
        Self.counter(in: self.feedbackSkipped, key: app) {
            Counter(
                label: "pushbridge_feedback_tokens_skipped_total", dimensions: [("app", app)], factory: self.factory)
        }.increment(by: count)
    }

    /// Counts a poll of the feedback service of `app` that failed or ended early (no connection, a timeout, a
    /// limit, bytes that are not the protocol, records Kafka did not take).
    package func feedbackPollFailed(app: String) {
        Self.counter(in: self.feedbackPollFailures, key: app) {
            Counter(label: "pushbridge_feedback_poll_failures_total", dimensions: [("app", app)], factory: self.factory)
        }.increment()
    }

    /// The label value for a reason: Apple's documented reasons and the bridge's own keep their name,
    /// anything else is `Unknown` (the raw reason stays in the outcome record).
    static func reasonLabel(_ reason: String?) -> String {
        guard let reason else { return "" }
        return Self.knownReasons.contains(reason) ? reason : "Unknown"
    }

    /// Reasons with a label of their own.
    static let knownReasons: Set<String> = Set(Reason.documented.map(\.rawValue)).union(
        ["RequestTimeout", "ConnectionLost", "Unreachable", "MalformedResponse", ErrorBody.malformedReason]
    )

    /// Records the consumer lag of one partition (high watermark minus committed offset).
    package func consumerLag(topic: String, partition: Int32, lag: Int64) {
        Self.gauge(in: self.lag, topic: topic, partition: partition) {
            Gauge(label: "pushbridge_consumer_lag", dimensions: $0, factory: self.factory)
        }.record(lag)
    }

    /// Records how long the oldest unfinished event of one partition has waited (0 when none waits).
    package func oldestUnfinished(topic: String, partition: Int32, age: Duration) {
        Self.gauge(in: self.oldestUnfinished, topic: topic, partition: partition) {
            Gauge(label: "pushbridge_oldest_unfinished_seconds", dimensions: $0, factory: self.factory)
        }.record(Double(age.components.seconds) + Double(age.components.attoseconds) / 1e18)
    }

    private static func gauge(
        in cache: borrowing Mutex<[LagKey: Gauge]>, topic: String, partition: Int32,
        make: ([(String, String)]) -> Gauge
    ) -> Gauge {
        let key = LagKey(topic: topic, partition: partition)
        if let gauge = cache.withLock({ $0[key] }) { return gauge }
        let gauge = make([("topic", topic), ("partition", String(partition))])
        return cache.withLock { gauges in
            if let existing = gauges[key] { return existing }
            gauges[key] = gauge
            return gauge
        }
    }

    private static func counter<Key: Hashable & Sendable>(
        in cache: borrowing Mutex<[Key: Counter]>,
        key: Key,
        make: () -> Counter
    ) -> Counter {
        if let counter = cache.withLock({ $0[key] }) {
            return counter
        }
        // Made outside the lock (the factory may lock too); a racing twin is harmless, the first one wins.
        let counter = make()
        return cache.withLock { counters in
            if let existing = counters[key] { return existing }
            counters[key] = counter
            return counter
        }
    }
}
