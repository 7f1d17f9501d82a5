/// One lane under `lanes:` (docs/configuration.md, "Lanes"): a share of `kafka.max_in_flight` and
/// `kafka.max_in_flight_bytes` of its own, which the notifications of the routes with `lane: NAME` take instead of
/// the default lane's. A full lane holds back only the partitions whose next event needs room in it.
package struct LaneSettings: Sendable, Hashable {
    /// The name routes give as `lane:`; a label value of the per-lane metrics.
    package var name: String
    /// `max_in_flight`: the lane's share of `kafka.max_in_flight`.
    package var maxInFlightNotifications: Int
    /// `max_in_flight_bytes`: the lane's share of `kafka.max_in_flight_bytes`.
    package var maxInFlightBytes: Int
    /// `expedite`: the lane's requests go ahead of other lanes' requests that wait for a free HTTP/2 stream.
    package var expedite: Bool

    /// Creates a lane.
    package init(name: String, maxInFlightNotifications: Int, maxInFlightBytes: Int, expedite: Bool = false) {
        self.name = name
        self.maxInFlightNotifications = maxInFlightNotifications
        self.maxInFlightBytes = maxInFlightBytes
        self.expedite = expedite
    }

    /// The name of the lane of routes without `lane:`, which gets what the named lanes leave of the bounds.
    package static let defaultName = "default"

    /// The default lane and then the named ones, each with its bounds: the default lane's are what `lanes` leave
    /// of `kafka`'s (at least 1 notification and 1 byte, so that a lane nobody uses still exists).
    package static func all(_ lanes: [LaneSettings], within kafka: KafkaSettings) -> [LaneSettings] {
        let count = kafka.maxInFlightNotifications - lanes.reduce(0) { $0 + $1.maxInFlightNotifications }
        let bytes = kafka.maxInFlightBytes - lanes.reduce(0) { $0 + $1.maxInFlightBytes }
        let fallback = LaneSettings(
            name: Self.defaultName, maxInFlightNotifications: max(1, count), maxInFlightBytes: max(1, bytes))
        return [fallback] + lanes
    }

    /// `bytes` as a configuration would write it when it is whole MiB (`8 MiB`), else in bytes: for messages.
    package static func describe(bytes: Int) -> String {
        bytes % (1 << 20) == 0 ? "\(bytes >> 20) MiB" : "\(bytes) bytes"
    }
}
