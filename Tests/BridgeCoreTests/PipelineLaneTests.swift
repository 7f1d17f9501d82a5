import APNSCore
import Foundation
import Logging
import PipelineTestSupport
import Routing
import Synchronization
import TestWaiting
import Testing

@testable import BridgeCore

// Lanes (issue 32): each lane's share of the in-flight bounds, against the in-memory parts of PipelineTests.

@Suite("Pipeline: lanes")
struct PipelineLaneTests {
    static let bulkPartition = PartitionID(topic: "in", partition: 0)
    static let urgentPartition = PartitionID(topic: "in", partition: 1)

    /// An event of `partition` with one notification per token.
    static func event(_ partition: PartitionID, offset: Int64, tokens: [String]) -> SourceEvent {
        let list = tokens.map { "\"\($0)\"" }.joined(separator: ",")
        return SourceEvent(
            source: SourceCoordinates(
                topic: partition.topic, partition: partition.partition, offset: offset, key: nil),
            value: Array(#"{"tokens":[\#(list)]}"#.utf8), headers: [], timestampMilliseconds: nil,
            assignmentGeneration: 1)
    }

    /// The lanes of the tests: the default lane (bulk) with 10, `urgent` with 5, expedited.
    static let lanes = [
        LaneSpec(name: "default", maxInFlight: 10, maxInFlightBytes: 1 << 20),
        LaneSpec(name: "urgent", maxInFlight: 5, maxInFlightBytes: 1 << 20, expedite: true),
    ]

    /// 50 bulk events, then 5 urgent ones: without lanes, the urgent ones are read only once the bulk ones have room.
    static var backlogThenTrickle: [SourceEvent] {
        (0..<50).map { Self.event(Self.bulkPartition, offset: Int64($0), tokens: ["b\($0)"]) }
            + (0..<5).map { Self.event(Self.urgentPartition, offset: Int64($0), tokens: ["u\($0)"]) }
    }

    /// ``backlogThenTrickle`` through ``lanes`` (the urgent partition's events in `urgent`) to `sender`.
    fileprivate static func backlogThenTrickle(to sender: GatedSender) -> Harness {
        Harness(
            events: Self.backlogThenTrickle, configuration: PipelineConfiguration(maxInFlight: 15, lanes: Self.lanes),
            mapper: LaneMapper { $0.partition == Self.urgentPartition ? ["urgent"] : [nil] }, sender: sender)
    }

    @Test(
        "a full lane holds back only its own partitions: urgent events are delivered while the bulk lane is full and stuck",
        arguments: [true, false])
    func fullLaneHoldsBackOnlyItsPartitions(lanes: Bool) async throws {
        let sender = GatedSender { $0.hasPrefix("b") }
        let configuration = PipelineConfiguration(maxInFlight: 15, lanes: lanes ? Self.lanes : [])
        let harness = Harness(
            events: Self.backlogThenTrickle, configuration: configuration,
            mapper: LaneMapper { $0.partition == Self.urgentPartition ? ["urgent"] : [nil] }, sender: sender)
        let run = Task { try await harness.pipeline.run() }
        guard lanes else {
            // One line of 15: ten bulk notifications would not stop it, but fifteen do, and the urgent events wait.
            try await harness.waitFor(inFlight: 15)
            try await Task.sleep(for: .milliseconds(200))
            #expect(sender.sent.filter { $0.hasPrefix("u") }.isEmpty, "the urgent events did not wait: proves nothing")
            sender.open()
            try await harness.source.waitFor(committed: 5, of: Self.urgentPartition)
            harness.source.finish()
            try await run.value
            return
        }
        try await harness.source.waitFor(committed: 5, of: Self.urgentPartition)
        // The bulk lane is full and stuck, and only its partition waits.
        #expect(harness.pipeline.inFlight(lane: "default")?.count == 10)
        // Its 40 events queued are far below the lane's bound: the partition is held back but not paused.
        #expect(!harness.source.isPaused(Self.bulkPartition))
        #expect(!harness.source.isPaused(Self.urgentPartition))
        #expect(harness.pipeline.heldBackPartitionsByLane() == ["default": 1, "urgent": 0])
        #expect(harness.source.committed[Self.bulkPartition] == nil)
        #expect(sender.expedited == Set((0..<5).map { "u\($0)" }), "only the urgent lane's requests are expedited")
        sender.open()
        try await harness.source.waitFor(committed: 50, of: Self.bulkPartition)
        try await harness.drained()
        #expect(!harness.source.isPaused(Self.bulkPartition), "the partition is resumed once it caught up")
        #expect(sender.sent.filter { $0.hasPrefix("b") } == (0..<50).map { "b\($0)" }, "bulk order")
        #expect(harness.sink.values(topic: "pushbridge.outcomes").count == 55)
        #expect(harness.pipeline.inFlight(lane: "urgent")?.count == 0)
        harness.source.finish()
        try await run.value
    }

    @Test(
        "a reload that raises a full lane's share lets that much more in at once, and one that lowers it takes nothing new until in flight fits"
    )
    func reloadedShares() async throws {
        let sender = GatedSender { $0.hasPrefix("b") }
        let harness = Self.backlogThenTrickle(to: sender)
        let run = Task { try await harness.pipeline.run() }
        try await harness.source.waitFor(committed: 5, of: Self.urgentPartition)
        try await harness.waitFor(inFlight: 10, lane: "default")
        #expect(harness.pipeline.heldBackPartitionsByLane()["default"] == 1)

        harness.pipeline.reloadLanes([
            LaneSpec(name: "default", maxInFlight: 30, maxInFlightBytes: 1 << 20),
            LaneSpec(name: "urgent", maxInFlight: 2, maxInFlightBytes: 1 << 20, expedite: false),
        ])
        try await harness.waitFor(inFlight: 30, lane: "default")
        #expect(sender.sent.filter { $0.hasPrefix("b") }.count == 30)
        #expect(harness.pipeline.lanes?.lane(named: "urgent").expedite == false)
        #expect(harness.pipeline.lanes?.lane(named: "urgent").flow.flow.limits.count == 2)

        // Lowered below what is in flight: the lane takes nothing new until it fits again.
        harness.pipeline.reloadLanes([LaneSpec(name: "default", maxInFlight: 5, maxInFlightBytes: 1 << 20)])
        #expect(harness.pipeline.lanes?.lane(named: "default").flow.acquireNow(bytes: 1) == nil)
        #expect(harness.pipeline.inFlight(lane: "default")?.count == 30)
        sender.open()
        try await harness.source.waitFor(committed: 50, of: Self.bulkPartition)
        try await harness.drained()
        #expect(sender.sent.filter { $0.hasPrefix("b") } == (0..<50).map { "b\($0)" }, "bulk order")
        #expect(harness.sink.values(topic: "pushbridge.outcomes").count == 55)
        harness.source.finish()
        try await run.value
    }

    @Test(
        "a reload adds a lane, and takes one away: its work in flight finishes in it, and its routes go to the default lane"
    )
    func reloadedLaneSet() async throws {
        let sender = GatedSender { $0.hasPrefix("u") }
        let harness = Self.backlogThenTrickle(to: sender)
        let run = Task { try await harness.pipeline.run() }
        try await harness.source.waitFor(committed: 50, of: Self.bulkPartition)
        try await harness.waitFor(inFlight: 5, lane: "urgent")
        let urgent = try #require(harness.pipeline.lanes?.lane(named: "urgent"))

        harness.pipeline.reloadLanes([
            LaneSpec(name: "default", maxInFlight: 10, maxInFlightBytes: 1 << 20),
            LaneSpec(name: "campaign", maxInFlight: 3, maxInFlightBytes: 1 << 20),
        ])
        #expect(harness.pipeline.laneNames == ["default", "campaign"])
        #expect(harness.pipeline.lanes?.lane(named: "campaign").flow.flow.limits.count == 3)
        #expect(harness.pipeline.readiness(lane: "campaign")?.isReady == true)
        #expect(harness.pipeline.lanes?.lane(named: "urgent") === harness.pipeline.lanes?.fallback)
        // Taken away, its five notifications still count, and a drain waits for them.
        #expect(harness.pipeline.inFlight == 5)
        #expect(await harness.pipeline.waitUntilEmpty(timeout: .milliseconds(50)) == false)
        sender.open()
        try await harness.source.waitFor(committed: 5, of: Self.urgentPartition)
        try await harness.drained()
        #expect(urgent.flow.inFlight.count == 0)
        #expect(harness.sink.values(topic: "pushbridge.outcomes").count == 55)

        // Named again, it is the same lane, with its new share.
        harness.pipeline.reloadLanes([
            LaneSpec(name: "default", maxInFlight: 10, maxInFlightBytes: 1 << 20),
            LaneSpec(name: "urgent", maxInFlight: 7, maxInFlightBytes: 1 << 20),
        ])
        #expect(harness.pipeline.lanes?.lane(named: "urgent") === urgent)
        #expect(urgent.flow.flow.limits.count == 7)
        harness.source.finish()
        try await run.value
    }

    @Test(
        "a full lane's held-back events past half its bytes pause their partition at the source until they are taken"
    )
    func heldBackBytesPauseThePartition() async throws {
        // 100 events of ~30 KB: 10 in flight, stuck; the lane's bound for queued events is 2 MiB (half its 4 MiB).
        let pad = String(repeating: "x", count: 30_000)
        let events = (0..<100).map { index in
            SourceEvent(
                source: SourceCoordinates(topic: "in", partition: 0, offset: Int64(index), key: nil),
                value: Array(#"{"tokens":["b\#(index)"],"pad":"\#(pad)"}"#.utf8), headers: [],
                timestampMilliseconds: nil, assignmentGeneration: 1)
        }
        let sender = GatedSender { $0.hasPrefix("b") }
        let configuration = PipelineConfiguration(
            maxInFlight: 20,
            lanes: [
                LaneSpec(name: "default", maxInFlight: 10, maxInFlightBytes: 4 << 20),
                LaneSpec(name: "urgent", maxInFlight: 10, maxInFlightBytes: 1 << 20),
            ])
        let harness = Harness(
            events: events, configuration: configuration, mapper: LaneMapper { _ in [nil] }, sender: sender)
        let run = Task { try await harness.pipeline.run() }
        try await harness.source.waitUntilPaused(Self.bulkPartition)
        #expect(harness.pipeline.inFlight(lane: "default")?.count == 10)
        sender.open()
        try await harness.source.waitFor(committed: 100, of: Self.bulkPartition)
        try await harness.drained()
        #expect(!harness.source.isPaused(Self.bulkPartition), "resumed once its queued events were taken")
        #expect(sender.sent == (0..<100).map { "b\($0)" })
        harness.source.finish()
        try await run.value
    }

    @Test(
        "an event whose pieces span two lanes, or more than its lane holds, starts them as each lane has room; its partition keeps its order and commits"
    )
    func eventsSpanningLanes() async throws {
        // Each event: 3 notifications in lane a (which holds 2) and 3 in lane b (which holds 4), on one partition.
        let events = (0..<12).map { index in
            Self.event(Self.bulkPartition, offset: Int64(index), tokens: (0..<3).map { "e\(index)-\($0)" })
        }
        let sender = GatedSender(latencyMilliseconds: 1) { _ in false }
        let configuration = PipelineConfiguration(
            maxInFlight: 10,
            lanes: [
                LaneSpec(name: "default", maxInFlight: 4, maxInFlightBytes: 1 << 20),
                LaneSpec(name: "a", maxInFlight: 2, maxInFlightBytes: 1 << 20),
                LaneSpec(name: "b", maxInFlight: 4, maxInFlightBytes: 1 << 20),
            ])
        let harness = Harness(
            events: events, configuration: configuration, mapper: LaneMapper { _ in ["a", "b"] }, sender: sender)
        let run = Task { try await harness.pipeline.run() }
        // Not `runToEnd()`: in flight falls to 0 between a lane's releases and the held-back partition taking room.
        try await harness.source.waitFor(committed: 12, of: Self.bulkPartition)
        try await harness.drained()
        harness.source.finish()
        try await run.value
        #expect(harness.sink.values(topic: "pushbridge.outcomes").count == 72)
        // Handed to the sender in input order: event by event, lane a's pieces, then lane b's, token by token.
        let expected = (0..<12).flatMap { index in
            ["a", "b"].flatMap { _ in (0..<3).map { "e\(index)-\($0)" } }
        }
        #expect(sender.sent == expected)
        #expect(["default", "a", "b"].allSatisfy { harness.pipeline.inFlight(lane: $0)?.count == 0 })
    }

    @Test("a partition revoked while it waits for room in a lane is let go at once: its begun event stays uncommitted")
    func revocationDoesNotWaitForRoom() async throws {
        // Lane a holds 1: event 0's first notification takes it and is stuck; its second waits for room.
        let events = (0..<3).map { Self.event(Self.bulkPartition, offset: Int64($0), tokens: ["x\($0)", "y\($0)"]) }
        let sender = GatedSender { _ in true }
        var configuration = PipelineConfiguration(
            maxInFlight: 10,
            lanes: [
                LaneSpec(name: "default", maxInFlight: 9, maxInFlightBytes: 1 << 20),
                LaneSpec(name: "a", maxInFlight: 1, maxInFlightBytes: 1 << 20),
            ])
        // Far longer than the test: a revocation that waited for room (or for the stuck send) would hang it.
        configuration.rebalanceDrainTimeout = .seconds(300)
        configuration.drainTimeout = .seconds(1)
        let harness = Harness(
            events: events, configuration: configuration, mapper: LaneMapper { _ in ["a"] }, sender: sender)
        let run = Task { try await harness.pipeline.run() }
        try await waitUntil { harness.pipeline.heldBackPartitionsByLane()["a"] == 1 && sender.sent == ["x0"] }
        let listener = try #require(harness.source.listener)
        _ = try await withTimeout(.seconds(60), "the revocation") {
            await listener.partitionsRevoked([Self.bulkPartition])
        }
        #expect(harness.pipeline.heldBackPartitionsByLane()["a"] == 0)
        sender.open()
        try await harness.drained()
        #expect(sender.sent == ["x0"], "nothing of the revoked partition was sent after its revocation")
        #expect(harness.source.committed[Self.bulkPartition] == nil)
        harness.source.finish()
        try await run.value
    }

    @Test(
        "/readyz per lane: a lane full and stuck for the stall time is not ready, the others are; unknown lanes are nil"
    )
    func readinessPerLane() async throws {
        let sender = GatedSender { $0.hasPrefix("b") }
        let harness = Self.backlogThenTrickle(to: sender)
        let run = Task { try await harness.pipeline.run() }
        try await harness.waitForLane("default", "stalled") { _, stalled in stalled }
        let reason = harness.pipeline.readiness(lane: "default")?.reason ?? ""
        #expect(reason.contains("lane default: full (10 of 10 in flight"), "\(reason)")
        #expect(harness.pipeline.readiness(lane: "urgent") == .ready)
        #expect(harness.pipeline.readiness == .ready, "a stuck lane does not make the instance unready")
        #expect(harness.pipeline.readiness(lane: "nonesuch") == nil)
        sender.open()
        try await harness.waitForLane("default", "moving again") { _, stalled in !stalled }
        #expect(harness.pipeline.readiness(lane: "default") == .ready)
        harness.source.finish()
        try await run.value
    }

    @Test("without lanes the one line is the default lane: its readiness and levels, and no other lane")
    func withoutLanes() async throws {
        let harness = Harness(
            events: [], configuration: PipelineConfiguration(), mapper: LaneMapper { _ in [nil] },
            sender: GatedSender { _ in false })
        #expect(harness.pipeline.laneNames == ["default"])
        #expect(harness.pipeline.readiness(lane: "default") == .ready)
        #expect(harness.pipeline.readiness(lane: "urgent") == nil)
        #expect(harness.pipeline.inFlight(lane: "default")?.count == 0)
        #expect(harness.pipeline.heldBackPartitionsByLane() == ["default": 0])
    }
}

/// ``TokensMapper``'s notifications, once per lane that `lanes` gives the event (`nil`: the default lane), each as
/// the route `r-LANE`.
private struct LaneMapper: EventMapper {
    let lanes: @Sendable (SourceEvent) -> [String?]

    func map(_ event: SourceEvent) -> [RouteMapping] {
        let mapped = TokensMapper(expiration: nil).map(event)
        return self.lanes(event).flatMap { lane in
            mapped.map { mapping in
                RouteMapping(
                    route: "r-\(lane ?? "default")", app: mapping.app, outcome: mapping.outcome,
                    coalesces: mapping.coalesces, context: mapping.context, lane: lane)
            }
        }
    }
}

/// Records the order notifications are handed to it in (synchronously, as the pipeline hands them over) and which
/// were expedited; answers 200, those `held` says only once ``open()`` was called.
private final class GatedSender: SimulatedAPNs {
    private struct State {
        var sent: [String] = []
        var expedited: Set<String> = []
        var open = false
        /// Held sends waiting for ``open()``.
        var waiting: [CheckedContinuation<Void, Never>] = []
    }
    private let state = Mutex(State())
    private let held: @Sendable (String) -> Bool
    private let latencyMilliseconds: Int

    init(latencyMilliseconds: Int = 0, held: @escaping @Sendable (String) -> Bool) {
        self.latencyMilliseconds = latencyMilliseconds
        self.held = held
    }

    var sent: [String] { self.state.withLock { $0.sent } }
    var expedited: Set<String> { self.state.withLock { $0.expedited } }
    func open() {
        let waiting = self.state.withLock { state in
            state.open = true
            defer { state.waiting = [] }
            return state.waiting
        }
        for continuation in waiting { continuation.resume() }
    }

    func handedOver(_ notification: APNSCore.Notification) {
        self.state.withLock { state in
            state.sent.append(notification.deviceToken)
            if notification.expedited { state.expedited.insert(notification.deviceToken) }
        }
    }

    func answer(_ notification: APNSCore.Notification, app: String?) async -> APNSResult {
        if self.latencyMilliseconds > 0 { try? await Task.sleep(for: .milliseconds(self.latencyMilliseconds)) }
        // Suspended until opened, not polling: a dozen held sends polling every few milliseconds in each of these
        // tests took the cooperative threads from the other suites running beside them.
        if self.held(notification.deviceToken) {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let resumeNow = self.state.withLock { state in
                    if state.open { return true }
                    state.waiting.append(continuation)
                    return false
                }
                if resumeNow { continuation.resume() }
            }
        }
        return .answered(APNSResponse(status: 200, reason: nil, invalidSinceEpochMilliseconds: nil))
    }
}
