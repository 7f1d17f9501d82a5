import DequeModule
import Synchronization

/// Applies ``FlowControl`` to a source: hands out room for pieces of work (``acquire(bytes:)`` suspends while
/// the line is full, so the consumer stops taking events instead of buffering them), and pauses or resumes
/// fetching as the levels change. While a wait for room lasts, it watches the clock: when nothing is released for
/// ``stallTimeout``, the line is stalled and fetching pauses (``FlowControl/markStalled()``).
///
/// Every decision and its effect on the source happen under one lock. Callers run on different threads (the
/// consuming task acquires, the producer's delivery reports release, a sender halts the line), and an effect
/// applied after unlocking could reach the source after a later, opposite one: partitions would stay paused
/// with no reason left to resume them. Pausing and resuming only flag partitions in librdkafka, so the lock is
/// held briefly.
final class FlowController: Sendable {
    private struct Waiter {
        var id: UInt64
        var bytes: Int
        var continuation: CheckedContinuation<Bool, Never>
    }

    private struct State {
        var flow: FlowControl
        var waiters: Deque<Waiter> = []
        var nextWaiterID: UInt64 = 0
        /// Set by ``stopWaiting()``: nobody waits for room any more.
        var stopped = false
        var emptyWaiters: [CheckedContinuation<Void, Never>] = []
        /// Releases so far (wrapping): a stall watch compares it across its sleep.
        var releases: UInt64 = 0
    }

    private let state: Mutex<State>
    private let source: any EventSource
    private let onChange: @Sendable (FlowControl.Levels) -> Void
    /// How long a full line may go without any release before fetching pauses.
    let stallTimeout: Duration

    /// - Parameters:
    ///   - maxCount: `kafka.max_in_flight`.
    ///   - maxBytes: `kafka.max_in_flight_bytes`.
    ///   - stallTimeout: how long a full line may go without any release before fetching pauses.
    ///   - onChange: hears the new in-flight levels (the `pushbridge_in_flight` gauges), inside the lock.
    init(
        source: any EventSource,
        maxCount: Int,
        maxBytes: Int,
        stallTimeout: Duration = FlowController.defaultStallTimeout,
        onChange: @escaping @Sendable (FlowControl.Levels) -> Void = { _ in }
    ) {
        self.source = source
        self.state = Mutex(State(flow: FlowControl(maxCount: maxCount, maxBytes: maxBytes)))
        self.stallTimeout = stallTimeout
        self.onChange = onChange
    }

    /// One second: far longer than a healthy full line goes between acknowledgements (milliseconds), far shorter
    /// than a request's timeout, so a line that stopped moving lets go of librdkafka's prefetch soon.
    static let defaultStallTimeout: Duration = .seconds(1)

    /// The work in flight now.
    var inFlight: FlowControl.Levels { self.state.withLock { $0.flow.inFlight } }

    /// The levels and pause state now, for tests.
    var flow: FlowControl { self.state.withLock { $0.flow } }

    /// Takes room for a piece holding `bytes`, waiting while the line is full. Room is handed out in FIFO order.
    ///
    /// Returns `false` without taking room when the wait ends otherwise: the calling task was cancelled, or
    /// ``stopWaiting()`` was called (shutdown). A full line that is also halted releases nothing until APNs
    /// accepts again, so a wait that shutdown could not end would hang the process.
    func acquire(bytes: Int) async -> Bool {
        if let acquired = self.acquireNow(bytes: bytes) { return acquired }
        return await withTaskGroup(of: Bool?.self) { group in
            group.addTask { await self.waitForRoom(bytes: bytes) }
            group.addTask {
                await self.watchForStall()
                return nil
            }
            var acquired = false
            for await answer in group {
                if let answer {
                    acquired = answer
                    break
                }
            }
            group.cancelAll()
            return acquired
        }
    }

    /// While the line is full: marks it stalled once a whole ``stallTimeout`` passes without a release. Returns
    /// then, when the line is no longer full, or when cancelled (the wait for room ended).
    private func watchForStall() async {
        var seen = self.state.withLock { $0.releases }
        while true {
            do { try await Task.sleep(for: self.stallTimeout) } catch { return }
            let done = self.state.withLock { state -> Bool in
                guard state.flow.full, !state.stopped else { return true }
                guard state.releases == seen else {
                    seen = state.releases
                    return false
                }
                self.apply(state.flow.markStalled())
                return true
            }
            if done { return }
        }
    }

    /// The wait of ``acquire(bytes:)`` once the line is full.
    private func waitForRoom(bytes: Int) async -> Bool {
        let id = self.state.withLock { state -> UInt64 in
            state.nextWaiterID += 1
            return state.nextWaiterID
        }
        return await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
                let answer = self.state.withLock { state -> Bool? in
                    if state.stopped || Task.isCancelled { return false }
                    // Room may have come back between the two locks.
                    if state.waiters.isEmpty && state.flow.fits(bytes: bytes) {
                        state.flow.take(bytes: bytes)
                        self.onChange(state.flow.inFlight)
                        return true
                    }
                    state.waiters.append(Waiter(id: id, bytes: bytes, continuation: continuation))
                    return nil
                }
                if let answer { continuation.resume(returning: answer) }
            }
        } onCancel: {
            let waiter = self.state.withLock { state -> Waiter? in
                guard let index = state.waiters.firstIndex(where: { $0.id == id }) else { return nil }
                return state.waiters.remove(at: index)
            }
            waiter?.continuation.resume(returning: false)
        }
    }

    /// Takes room for a piece holding `bytes` when there is room now: `true`; `false` after ``stopWaiting()``;
    /// `nil` when ``acquire(bytes:)`` would wait (the line is marked full).
    func acquireNow(bytes: Int) -> Bool? {
        self.state.withLock { state -> Bool? in
            if state.stopped { return false }
            let (acquired, effect) = state.flow.acquire(bytes: bytes, queued: !state.waiters.isEmpty)
            self.apply(effect)
            if acquired { self.onChange(state.flow.inFlight) }
            return acquired ? true : nil
        }
    }

    /// Ends every wait for room, now and from now on (``acquire(bytes:)`` returns `false`): shutdown began.
    func stopWaiting() {
        let waiters = self.state.withLock { state -> Deque<Waiter> in
            state.stopped = true
            self.apply(state.flow.beginShutdown())
            defer { state.waiters.removeAll() }
            return state.waiters
        }
        for waiter in waiters { waiter.continuation.resume(returning: false) }
    }

    /// Returns a piece's room; once in flight is down to the resume levels, hands room on to the oldest waiters
    /// that fit (see ``FlowControl/admitsWaiter(bytes:)``).
    func release(bytes: Int) {
        let (woken, drained) = self.state.withLock { state in
            state.flow.release(bytes: bytes)
            state.releases &+= 1
            var woken: [CheckedContinuation<Bool, Never>] = []
            while let first = state.waiters.first,
                woken.isEmpty ? state.flow.admitsWaiter(bytes: first.bytes) : state.flow.fits(bytes: first.bytes)
            {
                state.waiters.removeFirst()
                state.flow.take(bytes: first.bytes)
                woken.append(first.continuation)
            }
            self.apply(state.flow.settle(waiting: !state.waiters.isEmpty))
            self.onChange(state.flow.inFlight)
            var drained: [CheckedContinuation<Void, Never>] = []
            if state.flow.inFlight.count == 0 {
                swap(&drained, &state.emptyWaiters)
            }
            return (woken, drained)
        }
        for continuation in woken { continuation.resume(returning: true) }
        for continuation in drained { continuation.resume() }
    }

    /// The line halted (`true`) or resumed.
    func setHalted(_ halted: Bool) {
        self.state.withLock { state in self.apply(state.flow.setHalted(halted)) }
    }

    func assigned(_ partitions: [PartitionID]) {
        self.state.withLock { state in self.apply(state.flow.assign(partitions)) }
    }

    func revoked(_ partitions: [PartitionID]) {
        self.state.withLock { state in state.flow.revoke(partitions) }
    }

    /// Waits until nothing is in flight, or `timeout` passes. Returns `true` when drained.
    func waitUntilEmpty(timeout: Duration) async -> Bool {
        if self.inFlight.count == 0 { return true }
        return await withTaskGroup(of: Bool.self) { group in
            group.addTask {
                await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                    let done: Bool = self.state.withLock { state in
                        if state.flow.inFlight.count == 0 { return true }
                        state.emptyWaiters.append(continuation)
                        return false
                    }
                    if done { continuation.resume() }
                }
                return true
            }
            group.addTask {
                try? await Task.sleep(for: timeout)
                return false
            }
            let first = await group.next() ?? false
            if !first {
                // Timed out: wake the emptiness waiter so the group can finish.
                var waiters: [CheckedContinuation<Void, Never>] = []
                self.state.withLock { swap(&waiters, &$0.emptyWaiters) }
                for waiter in waiters { waiter.resume() }
            }
            group.cancelAll()
            return first
        }
    }

    /// Called inside the lock.
    private func apply(_ effect: FlowControl.Effect) {
        switch effect {
        case .none: break
        case .pause(let partitions): self.source.pause(partitions)
        case .resume(let partitions): self.source.resume(partitions)
        }
    }
}
