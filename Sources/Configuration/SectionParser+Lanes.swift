import Routing
import SafeText

// `lanes:` and a route's `lane:` (docs/configuration.md, "Lanes").
extension SectionParser {
    static let laneKeys = ["max_in_flight", "max_in_flight_bytes", "expedite"]

    /// `lanes:`: each named lane's share of `kafka.max_in_flight` and `max_in_flight_bytes`, in file order. The
    /// shares must leave room within `kafka`'s bounds (checked against the routes by
    /// ``checkDefaultLane(of:lanes:kafka:)``); `kafka` is `nil` when its section has problems of its own, and the
    /// defaults stand in for it.
    func lanes(_ value: ConfigValue, kafka: KafkaSettings?) -> [LaneSpec]? {
        guard let mapping = value.mapping(known: nil) else {
            return nil
        }
        let totals = kafka ?? KafkaSettings(bootstrapServers: "")
        var lanes: [LaneSpec] = []
        var valid = true
        for entry in mapping.entries {
            if let lane = self.lane(named: entry.key, entry.value, totals: totals) {
                lanes.append(lane)
            } else {
                valid = false
            }
        }
        guard valid else { return nil }
        let count = lanes.reduce(0) { $0 + $1.maxInFlight }
        let bytes = lanes.reduce(0) { $0 + $1.maxInFlightBytes }
        if count > totals.maxInFlightNotifications {
            value.report(
                .invalidValue,
                "the lanes' max_in_flight add up to \(count), more than kafka.max_in_flight "
                    + "(\(totals.maxInFlightNotifications)): lanes share that bound, they do not add to it",
                hint: "lower the lanes' max_in_flight, or raise kafka.max_in_flight; routes without lane: get what "
                    + "the lanes leave")
            valid = false
        }
        if bytes > totals.maxInFlightBytes {
            value.report(
                .invalidValue,
                "the lanes' max_in_flight_bytes add up to \(LaneSpec.describe(bytes: bytes)), more than "
                    + "kafka.max_in_flight_bytes (\(LaneSpec.describe(bytes: totals.maxInFlightBytes))): lanes share that bound, "
                    + "they do not add to it",
                hint: "lower the lanes' max_in_flight_bytes (a lane without it gets its max_in_flight's share of "
                    + "kafka.max_in_flight_bytes), or raise kafka.max_in_flight_bytes")
            valid = false
        }
        return valid ? lanes : nil
    }

    /// One lane of `lanes:`. Its `max_in_flight_bytes` defaults to the share of `kafka.max_in_flight_bytes` its
    /// `max_in_flight` has of `kafka.max_in_flight`, and at least 1 MiB.
    func lane(named name: String, _ value: ConfigValue, totals: KafkaSettings) -> LaneSpec? {
        if name == LaneSpec.defaultName {
            value.report(
                .invalidValue,
                "\"default\" is the lane of routes without lane:, and its bounds are what the other lanes leave of "
                    + "kafka.max_in_flight and kafka.max_in_flight_bytes",
                hint: "remove lanes.default; to change its share, change kafka's bounds or the other lanes'")
            return nil
        }
        guard Self.isLaneName(name) else {
            value.report(
                .invalidValue, "\"\(SafeText.excerpt(name, maxBytes: 60))\" is not a lane name",
                hint: "use up to 64 letters, digits, '.', '_' and '-' (it is a metric label and a /readyz parameter)")
            return nil
        }
        guard let mapping = value.mapping(known: Self.laneKeys) else {
            return nil
        }
        let count = mapping.required(
            "max_in_flight", hint: "the lane's share of kafka.max_in_flight, e.g. max_in_flight: 500"
        )?.integer(in: 1...10_000_000)
        let bytes = mapping["max_in_flight_bytes"].map { $0.byteSize(in: KafkaSettings.maxInFlightBytesRange) }
        let expedite = mapping["expedite"].map { $0.boolean() } ?? false
        guard let count, let expedite else {
            return nil
        }
        let share: Int
        if let bytes {
            guard let bytes else { return nil }
            share = bytes
        } else {
            let proportional = Double(totals.maxInFlightBytes) * Double(count) / Double(totals.maxInFlightNotifications)
            share = max(KafkaSettings.maxInFlightBytesRange.lowerBound, Int(proportional.rounded(.down)))
        }
        return LaneSpec(name: name, maxInFlight: count, maxInFlightBytes: share, expedite: expedite)
    }

    /// Letters, digits, `.`, `_` and `-`, 1 to 64 of them.
    static func isLaneName(_ name: String) -> Bool {
        !name.isEmpty && name.utf8.count <= 64 && name.utf8.allSatisfy(Self.isNameByte)
    }

    /// A route's `lane:`: a name under `lanes:`, or `default`. `.some(nil)`: the default lane; `nil`: a problem.
    func laneReference(_ value: ConfigValue, laneNames: Set<String>) -> String?? {
        guard let name = value.string()?.trimmingWhitespace() else {
            return nil
        }
        // Empty (`${LANE:-}`) means not given, as for other optional keys.
        if name.isEmpty || name == LaneSpec.defaultName { return .some(nil) }
        guard laneNames.contains(name) else {
            let known = laneNames.sorted()
            var hint =
                known.isEmpty
                ? "there is no lanes: section; define the lane there, or leave lane out for the default lane"
                : "lanes: defines \(known.joined(separator: ", ")); default is the lane of routes without lane:"
            if let suggestion = Suggestion.closest(to: name, among: known) {
                hint = "did you mean \(suggestion)? " + hint
            }
            value.report(.invalidValue, "\(value.describe(name)) is not a lane under lanes:", hint: hint)
            return nil
        }
        return name
    }

    /// Routes without `lane:` take room in the default lane, which gets what the named lanes leave of `kafka`'s
    /// bounds: it must keep at least one notification and 1 MiB.
    func checkDefaultLane(of routes: [(index: Int, spec: RouteSpec)], lanes: [LaneSpec], kafka: KafkaSettings) {
        guard !lanes.isEmpty, let first = routes.first(where: { $0.spec.lane == nil }) else { return }
        let count = kafka.maxInFlightNotifications - lanes.reduce(0) { $0 + $1.maxInFlight }
        let bytes = kafka.maxInFlightBytes - lanes.reduce(0) { $0 + $1.maxInFlightBytes }
        let minimumBytes = KafkaSettings.maxInFlightBytesRange.lowerBound
        guard count < 1 || bytes < minimumBytes else { return }
        let route = "routes[\(first.index)]" + (first.spec.name.isEmpty ? "" : " (\(first.spec.name))")
        self.reader.report(
            .invalidValue, at: "lanes", line: self.reader.line(of: "lanes"),
            "the lanes leave the default lane \(count < 1 ? "no notification" : "less than 1 MiB") of "
                + "kafka.max_in_flight\(count < 1 ? "" : "_bytes"), and \(route) has no lane: so it needs room there",
            hint: "give every route a lane:, or lower the lanes' shares so that the default lane keeps at least 1 "
                + "notification and 1 MiB")
    }
}
