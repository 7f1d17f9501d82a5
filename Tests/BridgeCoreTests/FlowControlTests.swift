import Foundation
import PipelineTestSupport
import Routing
import Synchronization
import TestWaiting
import Testing

@testable import BridgeCore

@Suite("Flow control")
struct FlowControlTests {
    private let p0 = PartitionID(topic: "in", partition: 0)
    private let p1 = PartitionID(topic: "in", partition: 1)

    @Test("full at the count limit waits without pausing; stalled it pauses; in flight down to three quarters resumes")
    func countLimit() {
        var flow = FlowControl(maxCount: 4, maxBytes: 1 << 20)
        #expect(flow.assign([self.p0]) == .resume([self.p0]))
        #expect(flow.markStalled() == .none, "not full: nothing to stall")
        for _ in 0..<4 { #expect(flow.acquire(bytes: 10, queued: false) == (true, .none)) }
        let refused = flow.acquire(bytes: 10, queued: false)
        #expect(!refused.acquired)
        #expect(refused.effect == .none, "a full line that moves keeps fetching")
        #expect(flow.full && !flow.paused)
        #expect(flow.markStalled() == .pause([self.p0]))
        #expect(flow.markStalled() == .none, "already paused")
        flow.release(bytes: 10)
        #expect(flow.settle(waiting: false) == .resume([self.p0]))
        #expect(!flow.full && !flow.stalled)
        #expect(flow.inFlight == FlowControl.Levels(count: 3, bytes: 30))
    }

    @Test("a stalled line stays paused until in flight is down to the resume levels")
    func stallHoldsUntilResumeLevels() {
        var flow = FlowControl(maxCount: 8, maxBytes: 1 << 20)
        _ = flow.assign([self.p0])
        for _ in 0..<8 { _ = flow.acquire(bytes: 1, queued: false) }
        _ = flow.acquire(bytes: 1, queued: false)
        #expect(flow.markStalled() == .pause([self.p0]))
        flow.release(bytes: 1)
        #expect(flow.settle(waiting: false) == .none, "7 in flight, above the resume level 6")
        flow.release(bytes: 1)
        #expect(flow.settle(waiting: false) == .resume([self.p0]))
    }

    @Test("bytes bound: a piece waits while its bytes do not fit, but one piece alone always goes through")
    func byteLimit() {
        var flow = FlowControl(maxCount: 100, maxBytes: 1000)
        #expect(flow.acquire(bytes: 600, queued: false).acquired)
        #expect(!flow.acquire(bytes: 600, queued: false).acquired)
        #expect(flow.full)
        flow.release(bytes: 600)
        _ = flow.settle(waiting: true)
        #expect(flow.full, "still full while a piece waits")
        #expect(flow.fits(bytes: 5000), "nothing in flight: an oversized piece goes through alone")
        flow.take(bytes: 5000)
        #expect(!flow.fits(bytes: 1))
        flow.release(bytes: 5000)
        #expect(flow.settle(waiting: false) == .none, "nothing assigned: nothing to tell")
        #expect(!flow.full)
    }

    @Test("room during a halt does not resume; the resume after the halt does")
    func haltOverridesRoom() {
        var flow = FlowControl(maxCount: 1, maxBytes: 1 << 20)
        _ = flow.assign([self.p0])
        _ = flow.acquire(bytes: 1, queued: false)
        _ = flow.acquire(bytes: 1, queued: false)
        #expect(flow.markStalled() == .pause([self.p0]))
        #expect(flow.setHalted(true) == .none)
        flow.release(bytes: 1)
        #expect(flow.settle(waiting: false) == .none)
        #expect(flow.paused)
        #expect(flow.setHalted(false) == .resume([self.p0]))
        #expect(flow.beginShutdown() == .pause([self.p0]))
        #expect(flow.setHalted(false) == .none, "shutting down: stays paused")
    }

    @Test("a partition assigned while paused is paused; assigned while running is resumed")
    func assignmentFollowsTheLevel() {
        var flow = FlowControl(maxCount: 10, maxBytes: 1 << 20)
        _ = flow.assign([self.p0])
        #expect(flow.setHalted(true) == .pause([self.p0]))
        flow.revoke([self.p0])
        #expect(flow.assign([self.p1]) == .pause([self.p1]))
        #expect(flow.setHalted(false) == .resume([self.p1]))
        #expect(flow.assign([self.p0]) == .resume([self.p0]))
    }

    /// A source that keeps each partition's pause flag across revocation and reassignment, as librdkafka does.
    private struct FlagSource {
        var paused: [PartitionID: Bool] = [:]
        mutating func apply(_ effect: FlowControl.Effect) {
            switch effect {
            case .none: break
            case .pause(let partitions): for partition in partitions { self.paused[partition] = true }
            case .resume(let partitions): for partition in partitions { self.paused[partition] = false }
            case .pauseAndResume(let paused, let resumed):
                for partition in paused { self.paused[partition] = true }
                for partition in resumed { self.paused[partition] = false }
            }
        }
    }

    private enum Step: CaseIterable {
        case acquire, release, stall, halt, unhalt, revokeP1, assignP1, shutdown
    }

    @Test(
        "in every order of acquires, releases, stalls, halts, rebalances and shutdown, assigned partitions are paused exactly when the levels say so"
    )
    func everyInterleaving() {
        var checked = 0
        for order in permutations(Step.allCases) {
            // Each step twice, so a step can meet the state its opposite left.
            for steps in [order, order + order.reversed()] {
                var flow = FlowControl(maxCount: 1, maxBytes: 1 << 20)
                var source = FlagSource()
                var held = 0
                var queued = 0
                source.apply(flow.assign([self.p0, self.p1]))
                for step in steps {
                    switch step {
                    case .acquire:
                        let (acquired, effect) = flow.acquire(bytes: 1, queued: queued > 0)
                        source.apply(effect)
                        if acquired { held += 1 } else { queued += 1 }
                    case .release:
                        guard held > 0 else { continue }
                        flow.release(bytes: 1)
                        held -= 1
                        if queued > 0, flow.fits(bytes: 1) {
                            flow.take(bytes: 1)
                            queued -= 1
                            held += 1
                        }
                        source.apply(flow.settle(waiting: queued > 0))
                    case .stall: source.apply(flow.markStalled())
                    case .halt: source.apply(flow.setHalted(true))
                    case .unhalt: source.apply(flow.setHalted(false))
                    case .revokeP1: flow.revoke([self.p1])
                    case .assignP1: source.apply(flow.assign([self.p1]))
                    case .shutdown: source.apply(flow.beginShutdown())
                    }
                    #expect(flow.paused == flow.shouldPause)
                    for partition in flow.assigned {
                        #expect(source.paused[partition] == flow.shouldPause, "\(steps) at \(step)")
                    }
                    #expect(flow.inFlight.count == held)
                }
                checked += 1
            }
        }
        #expect(checked == 2 * 40320)
    }

    @Test("a pause and a resume decided on two threads reach the source in the order decided")
    func concurrentHaltAndRoom() async {
        let source = RecordingSource()
        let controller = FlowController(source: source, maxCount: 2, maxBytes: 1 << 20)
        controller.assigned([self.p0])
        await withTaskGroup(of: Void.self) { group in
            group.addTask {
                for _ in 0..<2000 {
                    #expect(await controller.acquire(bytes: 1))
                    controller.release(bytes: 1)
                }
            }
            group.addTask {
                for index in 0..<2000 { controller.setHalted(index % 2 == 0) }
                controller.setHalted(false)
            }
        }
        #expect(controller.inFlight.count == 0)
        #expect(!controller.flow.shouldPause)
        #expect(source.isPaused(self.p0) == false)
    }

    @Test("never hands out more room than the limit, and every waiter gets room in the end")
    func boundsPermits() async {
        let controller = FlowController(source: RecordingSource(), maxCount: 8, maxBytes: 1 << 20)
        let counts = Concurrency()
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<200 {
                group.addTask {
                    #expect(await controller.acquire(bytes: 100))
                    counts.enter()
                    await Task.yield()
                    counts.leave()
                    controller.release(bytes: 100)
                }
            }
        }
        #expect(counts.highest <= 8)
        #expect(counts.highest >= 1)
        #expect(controller.inFlight == FlowControl.Levels(count: 0, bytes: 0))
    }

    @Test("waitUntilEmpty returns true once drained and false on timeout")
    func waitUntilEmpty() async {
        let controller = FlowController(source: RecordingSource(), maxCount: 2, maxBytes: 1 << 20)
        #expect(await controller.acquire(bytes: 1))
        let timedOut = await controller.waitUntilEmpty(timeout: .milliseconds(50))
        #expect(!timedOut)
        let drained = Task { await controller.waitUntilEmpty(timeout: .seconds(30)) }
        try? await Task.sleep(for: .milliseconds(20))
        controller.release(bytes: 1)
        #expect(await drained.value)
    }
}

extension FlowControlTests {
    @Test("shutdown ends a wait for room that nothing would end otherwise, and later waits at once")
    func stopWaitingEndsWaits() async throws {
        let source = RecordingSource()
        let controller = FlowController(source: source, maxCount: 1, maxBytes: 1 << 20)
        controller.assigned([PartitionID(topic: "in", partition: 0)])
        #expect(await controller.acquire(bytes: 1))
        let waiting = Task { await controller.acquire(bytes: 1) }
        while controller.flow.full == false { await Task.yield() }
        controller.stopWaiting()
        #expect(await waiting.value == false)
        #expect(await controller.acquire(bytes: 1) == false)
        #expect(controller.inFlight.count == 1, "a wait that ended took no room")
        #expect(source.isPaused(PartitionID(topic: "in", partition: 0)) == true)
    }

    @Test("a piece that finds the line full waits for the resume levels even when it starts waiting after a release")
    func lateWaiterWaitsForResumeLevels() async throws {
        let controller = FlowController(source: RecordingSource(), maxCount: 8, maxBytes: 1 << 20)
        for _ in 0..<8 { #expect(controller.acquireNow(bytes: 1) == true) }
        #expect(controller.acquireNow(bytes: 1) == nil, "the line is full")
        // A release lands between the piece finding the line full and its wait: 7 in flight, above the resume level.
        controller.release(bytes: 1)
        let waiting = Task { await controller.acquire(bytes: 1) }
        try await Task.sleep(for: .milliseconds(20))
        #expect(controller.inFlight.count == 7, "no room handed out above the resume level")
        controller.release(bytes: 1)
        #expect(await waiting.value)
        #expect(controller.inFlight.count == 7, "6 after the release, 7 with the waiter's room")
    }

    @Test("a full line wakes its waiting consumer once in flight is down to the resume levels, not per release")
    func waiterWokenAtResumeLevels() async throws {
        let controller = FlowController(source: RecordingSource(), maxCount: 8, maxBytes: 1 << 20)
        for _ in 0..<8 { #expect(await controller.acquire(bytes: 1)) }
        let waiting = Task { await controller.acquire(bytes: 1) }
        while controller.flow.full == false { await Task.yield() }
        controller.release(bytes: 1)
        // 7 in flight, above the resume level of 8 * 3 / 4: nothing is handed to the waiter yet (it would take
        // room, back to 8).
        try await Task.sleep(for: .milliseconds(20))
        #expect(controller.inFlight.count == 7)
        controller.release(bytes: 1)
        #expect(await waiting.value)
        #expect(controller.inFlight.count == 7, "6 after the release, 7 with the waiter's room")
        var flow = FlowControl(maxCount: 8, maxBytes: 100)
        for _ in 0..<6 { flow.take(bytes: 10) }
        #expect(flow.fits(bytes: 10) && flow.admitsWaiters)
        #expect(!flow.fits(bytes: 50), "fits the count but not the bytes")
        flow.take(bytes: 10)
        #expect(flow.fits(bytes: 10) && !flow.admitsWaiters)
        var oversized = FlowControl(maxCount: 8, maxBytes: 100)
        #expect(
            oversized.admitsWaiters && oversized.fits(bytes: 1000), "an oversized piece goes through on an empty line")
        oversized.take(bytes: 1000)
        #expect(!oversized.admitsWaiters && !oversized.fits(bytes: 1))
    }

    @Test("a held-back partition stays paused while the line resumes the others, and resumes when let go")
    func heldBackPartition() {
        var flow = FlowControl(maxCount: 4, maxBytes: 100)
        _ = flow.assign([self.p0, self.p1])
        #expect(flow.park(self.p0) == .pause([self.p0]))
        #expect(flow.park(self.p0) == .none)
        #expect(flow.setHalted(true) == .pause([self.p0, self.p1]))
        #expect(flow.setHalted(false) == .resume([self.p1]))
        #expect(flow.unpark(self.p0) == .resume([self.p0]))
        // Let go while every partition is paused: it resumes with the others.
        #expect(flow.park(self.p1) == .pause([self.p1]))
        #expect(flow.setHalted(true) == .pause([self.p0, self.p1]))
        #expect(flow.unpark(self.p1) == .none)
        #expect(flow.setHalted(false) == .resume([self.p0, self.p1]))
        // A revoked partition is no longer held back; one assigned again starts free.
        _ = flow.park(self.p0)
        flow.revoke([self.p0])
        #expect(flow.parked.isEmpty)
        #expect(flow.assign([self.p0]) == .resume([self.p0]))
        // Held back before its assignment is announced (its events came first): it is assigned paused.
        let p2 = PartitionID(topic: "in", partition: 2)
        let p3 = PartitionID(topic: "in", partition: 3)
        #expect(flow.park(p2) == .none)
        #expect(flow.assign([p2, p3]) == .pauseAndResume(pause: [p2], resume: [p3]))
    }

    @Test("a piece waiting in an ordered line holds bytes without a place; the line is not empty while it does")
    func waitingPieceHoldsBytesOnly() {
        var flow = FlowControl(maxCount: 2, maxBytes: 100)
        flow.take(bytes: 60)
        flow.release(bytes: 0, count: 1)  // it waits in its line: its place is free, its bytes are not
        #expect(flow.inFlight == FlowControl.Levels(count: 0, bytes: 60))
        #expect(flow.fits(bytes: 40) && !flow.fits(bytes: 41), "not empty: an oversized piece must not pass")
        flow.take(bytes: 40)
        flow.retakePlace()  // its turn came
        #expect(flow.inFlight == FlowControl.Levels(count: 2, bytes: 100))
        flow.release(bytes: 60)
        flow.release(bytes: 40)
        #expect(flow.inFlight == FlowControl.Levels(count: 0, bytes: 0))
    }

    @Test("a full line whose work keeps finishing is never paused")
    func movingFullLineKeepsFetching() async throws {
        let source = RecordingSource()
        let controller = FlowController(source: source, maxCount: 4, maxBytes: 1 << 20, stallTimeout: .seconds(1))
        controller.assigned([self.p0])
        // A release every 10 ms for 3 s, three stall timeouts: a controller that paused a full line after the stall
        // time whatever was released would be caught. The releases come from a thread of their own, not Swift's
        // cooperative pool, which the parallel suite can starve for a second: a starved consumer only leaves the
        // line less full, never makes it look stalled.
        let releasing = Task {
            await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
                Thread {
                    for _ in 0..<300 {
                        usleep(10_000)
                        controller.release(bytes: 1)
                    }
                    done.resume()
                }.start()
            }
            // Read before the shutdown below, which pauses as it should.
            let pauses = source.pauseCount
            controller.stopWaiting()
            return pauses
        }
        // The consumer takes pieces until the releases end (stopWaiting ends its last wait): from the fifth on it
        // waits whenever four are in flight.
        var waits = 0
        while true {
            if controller.acquireNow(bytes: 1) == nil {
                waits += 1
                guard await controller.acquire(bytes: 1) else { break }
            } else if controller.flow.shuttingDown {
                break
            }
        }
        let pausesWhileMoving = await releasing.value
        #expect(waits > 0, "the line was never full")
        #expect(pausesWhileMoving == 0)
    }

    @Test("a full line with nothing released pauses after the stall time, and resumes at the resume levels")
    func stuckFullLinePauses() async throws {
        let source = RecordingSource()
        let controller = FlowController(
            source: source, maxCount: 2, maxBytes: 1 << 20, stallTimeout: .milliseconds(500))
        controller.assigned([self.p0])
        #expect(await controller.acquire(bytes: 1))
        #expect(await controller.acquire(bytes: 1))
        let started = ContinuousClock.now
        let waiting = Task { await controller.acquire(bytes: 1) }
        while controller.flow.full == false { await Task.yield() }
        #expect(source.isPaused(self.p0) == false, "full, not stalled yet")
        _ = try await eventually(timeout: .seconds(30), every: .milliseconds(5)) { source.isPaused(self.p0) == true }
        #expect(source.isPaused(self.p0) == true)
        #expect(ContinuousClock.now - started >= .milliseconds(500))
        controller.release(bytes: 1)
        #expect(await waiting.value, "down to the resume level: the waiter gets room")
        #expect(source.isPaused(self.p0) == true, "2 in flight again: still above the resume level")
        controller.release(bytes: 1)
        #expect(source.isPaused(self.p0) == false)
        #expect(!controller.flow.stalled)
    }

    @Test("a cancelled wait for room ends without taking room")
    func cancelledWaitEnds() async throws {
        let controller = FlowController(source: RecordingSource(), maxCount: 1, maxBytes: 1 << 20)
        #expect(await controller.acquire(bytes: 1))
        let waiting = Task { await controller.acquire(bytes: 1) }
        while controller.flow.full == false { await Task.yield() }
        waiting.cancel()
        #expect(await waiting.value == false)
        controller.release(bytes: 1)
        #expect(controller.inFlight.count == 0)
        #expect(await controller.acquire(bytes: 1), "the cancelled waiter left no trace in the queue")
    }
}

/// All orders of `elements`.
private func permutations<Element>(_ elements: [Element]) -> [[Element]] {
    guard elements.count > 1 else { return [elements] }
    return elements.indices.flatMap { index in
        var rest = elements
        let first = rest.remove(at: index)
        return permutations(rest).map { [first] + $0 }
    }
}

/// A source that only records pause flags, and counts pauses.
private final class RecordingSource: EventSource {
    private let paused = Mutex<[PartitionID: Bool]>([:])
    private let pauses = Atomic<Int>(0)
    var pauseCount: Int { self.pauses.load(ordering: .relaxed) }
    func start(listener: any RebalanceListener) async throws -> AsyncThrowingStream<[SourceEvent], any Error> {
        AsyncThrowingStream { $0.finish() }
    }
    func markFinished(_ partition: PartitionID, nextOffset: Int64) {}
    func pause(_ partitions: [PartitionID]) {
        self.pauses.add(1, ordering: .relaxed)
        self.paused.withLock { for p in partitions { $0[p] = true } }
    }
    func resume(_ partitions: [PartitionID]) { self.paused.withLock { for p in partitions { $0[p] = false } } }
    func commit() async {}
    func lag() async -> [PartitionLag] { [] }
    func close() async {}
    func isPaused(_ partition: PartitionID) -> Bool? { self.paused.withLock { $0[partition] } }
}
