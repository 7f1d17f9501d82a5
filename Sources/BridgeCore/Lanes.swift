import APNSCore
import CoreMetrics
import DequeModule
import Routing
import Synchronization
import Waiting

/// A lane while the pipeline runs: its room, a ``FlowController`` of its own. The lane's controller pauses no
/// partition itself (it is told of none): a partition whose next event finds no room in a lane is held back on
/// its own (``Pipeline/holdBack(_:for:in:)``), and waits in the lane's turn for room.
final class Lane: Sendable {
    let name: String
    /// `expedite` (a reload may change it).
    var expedite: Bool { self.expediting.load(ordering: .relaxed) }
    private let expediting: Atomic<Bool>
    let flow: FlowController
    /// The most the events queued in the lane's holds may hold before each hold pauses its partition at the
    /// source: half its `max_in_flight_bytes` (at least 1 MiB), beside what the consumer had fetched. Each pause makes
    /// librdkafka drop the partition's prefetch and fetch it again on resume: a quarter cost 1 µs of CPU per
    /// notification more in the broker threads of a 200 000-event backlog (docs/benchmarks.md, "Lanes").
    var heldBackBoundBytes: Int { self.heldBackBound.load(ordering: .relaxed) }
    private let heldBackBound: Atomic<Int>
    /// What the events queued in the lane's holds hold now (changed under the parking's lock).
    let heldBytes = Atomic<Int>(0)

    init(_ budget: LaneSpec, source: any EventSource, metrics: BridgeMetrics) {
        self.name = budget.name
        self.expediting = Atomic(budget.expedite)
        self.heldBackBound = Atomic(Self.heldBackBound(of: budget))
        let gauges = metrics.inFlightGauges(lane: budget.name)
        self.flow = FlowController(
            source: source, maxCount: budget.maxInFlight, maxBytes: budget.maxInFlightBytes,
            onChange: { levels in
                gauges.count.record(levels.count)
                gauges.bytes.record(levels.bytes)
            })
    }
}

extension Lane {
    /// Takes `budget`'s shares and `expedite` (a reload changed them): for the next pieces and requests; what is in
    /// flight keeps its room.
    func apply(_ budget: LaneSpec) {
        self.expediting.store(budget.expedite, ordering: .relaxed)
        self.heldBackBound.store(Self.heldBackBound(of: budget), ordering: .relaxed)
        self.flow.setLimits(maxCount: budget.maxInFlight, maxBytes: budget.maxInFlightBytes)
    }

    private static func heldBackBound(of budget: LaneSpec) -> Int { max(1 << 20, budget.maxInFlightBytes / 2) }
}

/// The lanes of a pipeline with `lanes:`. A reload may change their shares, add lanes and take lanes away
/// (``reload(_:source:metrics:)``); the default lane stays.
final class Lanes: Sendable {
    private struct State {
        /// The lanes in force, in the configuration's order.
        var current: [Lane]
        /// Lanes a reload took away while they still had work in flight: their pieces release room into them, and a
        /// drain waits for them too.
        var retired: [Lane] = []
    }

    private let state: Mutex<State>
    /// The lane of routes without `lane:`: the one named `default` (the first, when none is).
    let fallback: Lane

    /// `nil` when `budgets` is empty: without lanes the pipeline keeps its one line and its code path.
    init?(_ budgets: [LaneSpec], source: any EventSource, metrics: BridgeMetrics) {
        let all = budgets.map { Lane($0, source: source, metrics: metrics) }
        guard let first = all.first else { return nil }
        self.state = Mutex(State(current: all))
        self.fallback = all.first { $0.name == LaneSpec.defaultName } ?? first
    }

    /// The lanes in force, in the configuration's order.
    var all: [Lane] { self.state.withLock { $0.current } }

    /// The lanes in force and those taken away that may still have work: what a drain waits for.
    var withRetired: [Lane] { self.state.withLock { $0.current + $0.retired } }

    /// The lane of a route's `lane:` (`nil`: the default lane). A name no lane has (a mapper older than a reload
    /// that took its lane away) falls back to the default lane.
    func lane(named name: String?) -> Lane {
        guard let name else { return self.fallback }
        return self.state.withLock { state in state.current.first { $0.name == name } } ?? self.fallback
    }

    /// What the lanes hold together.
    var inFlight: (count: Int, bytes: Int) {
        self.withRetired.reduce(into: (count: 0, bytes: 0)) { total, lane in
            let levels = lane.flow.inFlight
            total.count += levels.count
            total.bytes += levels.bytes
        }
    }

    /// Makes `budgets` (``LaneSpec/all(_:maxInFlight:maxInFlightBytes:)``, the default lane's among them) the lanes in
    /// force: a lane of the same name takes its new shares (``Lane/apply(_:)``), a new name makes a new lane, and a
    /// lane no budget names is taken away: routes that still name it go to the default lane, and what it has in
    /// flight finishes in it.
    func reload(_ budgets: [LaneSpec], source: any EventSource, metrics: BridgeMetrics) {
        self.state.withLock { state in
            let known = state.current + state.retired
            let next = budgets.map { budget in
                guard let lane = known.first(where: { $0.name == budget.name }) else {
                    return Lane(budget, source: source, metrics: metrics)
                }
                lane.apply(budget)
                return lane
            }
            state.retired = known.filter { lane in
                !next.contains { $0 === lane } && !lane.flow.flow.isEmpty
            }
            state.current = next
        }
    }
}

extension Pipeline {
    /// The pieces of a begun event not started yet: what waits for room in a lane while its partition is held back.
    struct PiecesToStart: Sendable {
        let event: SourceEvent
        let ticket: Ticket
        /// The mappings whose pieces are not all started, the first one's from ``next`` on.
        var results: ArraySlice<RouteMapping>
        /// The first notification of `results.first` not started yet.
        var next = 0
        /// The event's bytes still to share out among the pieces.
        var share: PieceBytes
        /// The event's headers its records carry (`outcomes.forward_headers`), read once per event.
        var forwarded: HeaderForwarding.Selection?
        /// The retry policy in force when the event was taken: its notifications keep it across a reload.
        var maxAttempts: Int
        var retryBackoff: Backoff
    }

    /// What taking room for one piece did.
    enum Room {
        case taken
        /// Shutdown (or cancellation) ended a wait for room.
        case stopped
        /// The piece's lane has no room now, and the caller must not wait (the consume loop, with lanes).
        case full(Lane)

        /// What ``Pipeline/start(_:waits:claim:in:sends:)`` returns when the piece has no room: `nil` when it has.
        func stop(_ rest: PiecesToStart) -> Taken? {
            switch self {
            case .taken: nil
            case .stopped: .stopped
            case .full(let lane): .laneFull(lane, rest)
            }
        }
    }

    /// Takes room for a piece of `ticket`'s event holding `bytes` in `lane`, or without lanes (`nil`) in the
    /// pipeline's own line, whose wait this is as before lanes. With lanes, the consume loop (`waits`
    /// false) never waits: a lane without room now answers ``Room/full(_:)``, and the event's partition is held back
    /// instead. A held-back partition's task (`claim`) waits; if the partition is revoked meanwhile, the revocation
    /// abandons the event (``forgetHeldBack(_:)``) rather than wait for room, and the room is given back here.
    @inline(__always)
    func room(
        bytes: Int, in lane: Lane?, waits: Bool, ticket: Ticket, claim: HoldClaim?, sends: inout [SendRequest]
    ) async -> Room {
        guard let lane else {
            if self.flow.acquireNow(bytes: bytes) != true {
                // About to wait for room: what is collected must go out first, or nothing frees room.
                self.send(&sends)
                guard await self.flow.acquire(bytes: bytes) else { return .stopped }
            }
            return .taken
        }
        if lane.flow.acquireNow(bytes: bytes) != true {
            guard waits else { return .full(lane) }
            self.send(&sends)
            if let claim, !claim.waiting(for: ticket, in: lane) {
                // Revoked already, before the revocation could know of this event.
                self.abandonUnstarted(ticket)
                return .stopped
            }
            let acquired = await lane.flow.acquire(bytes: bytes)
            let held = claim?.stillHeld() ?? true
            guard acquired else { return .stopped }
            guard held else {
                lane.flow.release(bytes: bytes)
                return .stopped
            }
        }
        return .taken
    }

    /// Holds back `rest`'s partition until `lane` has room for its pieces: the partition is paused at the source on
    /// its own, the events of it that still come queue behind, and a task in `group` starts the pieces once it has
    /// room, then takes the queued events (``takeHeldBack(_:id:)``). The other partitions go on.
    func holdBack(_ rest: PiecesToStart, for lane: Lane, in group: inout DiscardingTaskGroup) {
        // Revoked between its beginning and here: nothing holds the partition back any more.
        guard self.isCurrent(rest.ticket) else { return self.abandonUnstarted(rest.ticket) }
        self.hold(HeldBack(events: [], line: nil, lane: lane, rest: rest), of: rest.event.partition, in: &group)
    }

    /// Waits until nothing is in flight, in the lanes or the line, or `timeout` passes; `true` when drained. Once
    /// shutdown began nothing takes room again, so a lane found empty stays empty.
    package func waitUntilEmpty(timeout: Duration) async -> Bool {
        guard let lanes = self.lanes else { return await self.flow.waitUntilEmpty(timeout: timeout) }
        let deadline = ContinuousClock.now + timeout
        for lane in lanes.withRetired {
            guard await lane.flow.waitUntilEmpty(timeout: deadline - .now) else { return false }
        }
        return true
    }

    /// Ends every wait for room, the lanes' included, now and from now on: shutdown began.
    func stopWaitingForRoom() {
        self.flow.stopWaiting()
        for lane in self.lanes?.withRetired ?? [] { lane.flow.stopWaiting() }
    }

    /// The lanes' names, in the configuration's order; `["default"]` without lanes.
    package var laneNames: [String] {
        self.lanes?.all.map(\.name) ?? [LaneSpec.defaultName]
    }

    /// How many partitions are held back waiting for room in each lane (`pushbridge_lane_held_back_partitions`).
    package func heldBackPartitionsByLane() -> [String: Int] {
        // A lane a reload took away is reported too while it may still hold partitions back, so its gauge falls to 0.
        let names = self.lanes?.withRetired.map(\.name) ?? [LaneSpec.defaultName]
        var counts = [String: Int](names.map { ($0, 0) }) { first, _ in first }
        self.parking.read { parking in
            for held in parking.partitions.values where held.rest != nil || held.starting != nil {
                if let lane = held.lane { counts[lane.name, default: 0] += 1 }
            }
        }
        return counts
    }

    /// Each lane's work in flight now (the default lane's is the line's own without lanes), for the
    /// `pushbridge_in_flight{lane}` gauges' tests and `/readyz`.
    package func inFlight(lane name: String) -> (count: Int, bytes: Int)? {
        guard let lanes = self.lanes else {
            return name == LaneSpec.defaultName ? (self.flow.inFlight.count, self.flow.inFlight.bytes) : nil
        }
        return lanes.all.first { $0.name == name }.map { ($0.flow.inFlight.count, $0.flow.inFlight.bytes) }
    }

    /// Waits until `condition` holds for the lane named `name` (the line's own without lanes): its pieces in flight,
    /// and whether it is stalled (full, with nothing released for the stall time). Checked at once and after every
    /// change of the lane; `false` when `timeout` passed first or there is no such lane. For tests, which would
    /// otherwise poll ``inFlight(lane:)`` and ``readiness(lane:)``.
    package func waitForLane(
        _ name: String = LaneSpec.defaultName, timeout: Duration,
        until condition: @escaping @Sendable (_ inFlight: Int, _ stalled: Bool) -> Bool
    ) async -> Bool {
        let flow: FlowController
        if let lanes = self.lanes {
            guard let lane = lanes.all.first(where: { $0.name == name }) else { return false }
            flow = lane.flow
        } else {
            guard name == LaneSpec.defaultName else { return false }
            flow = self.flow
        }
        return await flow.waitUntil(timeout: timeout) { condition($0.inFlight.count, $0.stalled) }
    }

    /// What `/readyz?lane=NAME` says: the instance's readiness, and then whether the lane moves: not ready while
    /// it is full and nothing of it was released for the stall time (one second). `nil` for a lane that does not
    /// exist.
    package func readiness(lane name: String) -> Readiness? {
        let lane: (stalled: Bool, levels: FlowControl.Levels, limits: FlowControl.Levels)
        if let lanes = self.lanes {
            guard let found = lanes.all.first(where: { $0.name == name }) else { return nil }
            let flow = found.flow.flow
            lane = (flow.stalled, flow.inFlight, flow.limits)
        } else {
            guard name == LaneSpec.defaultName else { return nil }
            let flow = self.flow.flow
            lane = (flow.stalled, flow.inFlight, flow.limits)
        }
        let instance = self.readiness
        guard instance.isReady else { return instance }
        guard !lane.stalled else {
            return .notReady(
                "lane \(name): full (\(lane.levels.count) of \(lane.limits.count) in flight, \(lane.levels.bytes) of "
                    + "\(lane.limits.bytes) bytes) and nothing of it finished for "
                    + "\(self.flow.stallTimeout.components.seconds) s")
        }
        return .ready
    }
}

/// A held-back partition's task, as it waits for room for an event it is starting: the hold notes the event while
/// the wait lasts, so that a revocation of the partition abandons the event (it stays uncommitted, and its next owner
/// processes it) instead of waiting for the lane to have room.
struct HoldClaim: Sendable {
    let parking: AsyncCondition<Pipeline.Parking>
    let partition: PartitionID
    /// The hold's number (``Pipeline/Parking/holds``).
    let id: UInt64

    /// Notes that the hold waits for room for `ticket`'s event; `false` when the hold is gone (revoked).
    func waiting(for ticket: Pipeline.Ticket, in lane: Lane) -> Bool {
        self.parking.withLock { parking in
            guard parking.partitions[self.partition]?.id == self.id else { return false }
            parking.partitions[self.partition]?.starting = ticket
            parking.partitions[self.partition]?.wait(in: lane)
            return true
        }
    }

    /// The wait ended: whether the hold is still there (the partition was not revoked meanwhile).
    func stillHeld() -> Bool {
        self.parking.withLock { parking in
            guard parking.partitions[self.partition]?.id == self.id else { return false }
            parking.partitions[self.partition]?.starting = nil
            return true
        }
    }
}

extension MappedNotification {
    /// The same notification, marked to go ahead of other lanes' requests waiting for an HTTP/2 stream.
    func expedited() -> MappedNotification {
        var copy = self
        copy.notification.expedited = true
        return copy
    }
}
