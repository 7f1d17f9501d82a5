/// One lane as the configuration writes it (docs/configuration.md, "Lanes"): a share of `kafka.max_in_flight` and
/// `kafka.max_in_flight_bytes` of its own, which the notifications and dead letters of the routes with `lane: NAME`
/// take instead of the default lane's. A full lane holds back only the partitions whose next event needs room in it.
/// Plain data, like ``RouteSpec``: the configuration loader makes it, the pipeline runs it.
package struct LaneSpec: Sendable, Hashable {
    /// The name routes give as `lane:`; a label value of the per-lane metrics.
    package var name: String
    /// `max_in_flight`: the lane's share of `kafka.max_in_flight` (pieces of work in flight at most).
    package var maxInFlight: Int
    /// `max_in_flight_bytes`: the lane's share of `kafka.max_in_flight_bytes` (one larger piece still goes through
    /// when the lane is empty).
    package var maxInFlightBytes: Int
    /// `expedite`: the lane's requests go ahead of other lanes' requests that wait for a free HTTP/2 stream
    /// (``APNSCore/Notification/expedited``).
    package var expedite: Bool

    /// Creates a lane.
    package init(name: String, maxInFlight: Int, maxInFlightBytes: Int, expedite: Bool = false) {
        self.name = name
        self.maxInFlight = maxInFlight
        self.maxInFlightBytes = maxInFlightBytes
        self.expedite = expedite
    }

    /// The name of the lane of routes without `lane:`, which gets what the named lanes leave of the bounds.
    package static let defaultName = "default"

    /// The default lane and then `lanes`, each with its bounds: the default lane's are what `lanes` leave of
    /// `maxInFlight` and `maxInFlightBytes` (`kafka`'s; at least 1 notification and 1 byte, so that a lane nobody
    /// uses still exists).
    package static func all(_ lanes: [LaneSpec], maxInFlight: Int, maxInFlightBytes: Int) -> [LaneSpec] {
        let count = maxInFlight - lanes.reduce(0) { $0 + $1.maxInFlight }
        let bytes = maxInFlightBytes - lanes.reduce(0) { $0 + $1.maxInFlightBytes }
        let fallback = LaneSpec(name: Self.defaultName, maxInFlight: max(1, count), maxInFlightBytes: max(1, bytes))
        return [fallback] + lanes
    }

    /// `bytes` as a configuration would write it when it is whole MiB (`8 MiB`), else in bytes: for messages.
    package static func describe(bytes: Int) -> String {
        bytes % (1 << 20) == 0 ? "\(bytes >> 20) MiB" : "\(bytes) bytes"
    }
}
