import Waiting

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
    private struct State {
        var flow: FlowControl
        /// Set by ``stopWaiting()``: nobody waits for room any more.
        var stopped = false
        /// Releases so far (wrapping): a stall watch compares it across its sleep.
        var releases: UInt64 = 0
        /// Whether waiting pieces may take room: while the line is not full, and during a release that brought in
        /// flight down to the resume levels (or to nothing), until a waiting piece does not fit.
        var handingOut = true
    }

    private let state: AsyncCondition<State>
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
        self.state = AsyncCondition(State(flow: FlowControl(maxCount: maxCount, maxBytes: maxBytes)))
        self.stallTimeout = stallTimeout
        self.onChange = onChange
    }

    /// One second: far longer than a healthy full line goes between acknowledgements (milliseconds), far shorter
    /// than a request's timeout, so a line that stopped moving lets go of librdkafka's prefetch soon.
    static let defaultStallTimeout: Duration = .seconds(1)

    /// The work in flight now.
    var inFlight: FlowControl.Levels { self.state.read { $0.flow.inFlight } }

    /// The levels and pause state now, for tests.
    var flow: FlowControl { self.state.read { $0.flow } }

    /// Takes room for a piece holding `bytes`, waiting while the line is full. Room is handed out in FIFO order.
    ///
    /// Returns `false` without taking room when the wait ends otherwise: the calling task was cancelled, or
    /// ``stopWaiting()`` was called (shutdown). A full line that is also halted releases nothing until APNs
    /// accepts again, so a wait that shutdown could not end would hang the process.
    func acquire(bytes: Int) async -> Bool {
        if let acquired = self.acquireNow(bytes: bytes) { return acquired }
        return await withTaskGroup(of: Bool?.self) { group in
            group.addTask {
                await self.state.wait(inTurn: true) { state in self.takeRoom(&state, bytes: bytes) }.value ?? false
            }
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

    /// Takes room for a piece holding `bytes` when there is room now: `true`; `false` after ``stopWaiting()``;
    /// `nil` when ``acquire(bytes:)`` would wait (the line is marked full).
    func acquireNow(bytes: Int) -> Bool? {
        self.state.check(inTurn: true) { state in self.takeRoom(&state, bytes: bytes) }
    }

    /// The condition of a piece waiting for room, in turn: room while it is handed out and the piece fits (or
    /// nothing is in flight, so an oversized piece still goes through); otherwise the line is full.
    private func takeRoom(_ state: inout State, bytes: Int) -> Bool? {
        if state.stopped { return false }
        let handedOut = state.handingOut || state.flow.inFlight.count == 0
        // Checked again on every release of a full line: the common answer first, without changing anything.
        if !handedOut && state.flow.full { return nil }
        let (acquired, effect) = state.flow.acquire(bytes: bytes, queued: !handedOut)
        self.apply(effect)
        guard acquired else {
            state.handingOut = false
            return nil
        }
        self.onChange(state.flow.inFlight)
        return true
    }

    /// While the line is full: marks it stalled once a whole ``stallTimeout`` passes without a release. Returns
    /// then, when the line is no longer full, or when cancelled (the wait for room ended). A timer, not a wait for
    /// a signal: a release must not cost a wake-up.
    private func watchForStall() async {
        var seen = self.state.read { $0.releases }
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

    /// Ends every wait for room, now and from now on (``acquire(bytes:)`` returns `false`): shutdown began.
    func stopWaiting() {
        self.state.withLock { state in
            state.stopped = true
            self.apply(state.flow.beginShutdown())
        }
    }

    /// Returns a piece's room; once in flight is down to the resume levels (``FlowControl/admitsWaiters``),
    /// hands room on to the oldest waiters that fit. Handing room to the waiting consumer on every single release of
    /// a full line would cost it a wake-up per piece.
    func release(bytes: Int, count: Int = 1) {
        self.state.withLock { state in
            state.flow.release(bytes: bytes, count: count)
            state.releases &+= 1
            if !state.handingOut { state.handingOut = state.flow.admitsWaiters }
        } settle: { state, waiting in
            self.settle(&state, waiting: waiting)
        }
    }

    /// New bounds (a reload changed the lane's shares): waiting pieces that fit them take room at once; with lower
    /// bounds, what is in flight drains as usual and nothing new is taken until it fits.
    func setLimits(maxCount: Int, maxBytes: Int) {
        self.state.withLock { state in
            state.flow.setLimits(maxCount: maxCount, maxBytes: maxBytes)
            state.handingOut = true
        } settle: { state, waiting in
            self.settle(&state, waiting: waiting)
        }
    }

    /// After room was handed to the waiters that fit (a release, new bounds): tells the source what changed and
    /// decides whether room goes on being handed out.
    private func settle(_ state: inout State, waiting: Int) {
        self.apply(state.flow.settle(waiting: waiting > 0))
        // Whoever still waits did not fit, and a full line stays full until the resume levels (also for a piece that
        // is only about to wait): room is handed out again from the release that gets there.
        state.handingOut = waiting == 0 && !state.flow.full
        self.onChange(state.flow.inFlight)
    }

    /// A piece that waited in an ordered line is in flight again (``FlowControl/retakePlace()``).
    func retakePlace() {
        self.state.withLock { state in
            state.flow.retakePlace()
            self.onChange(state.flow.inFlight)
        }
    }

    /// Holds `partition` back on its own (``FlowControl/park(_:)``).
    func park(_ partition: PartitionID) {
        self.state.withLock { state in self.apply(state.flow.park(partition)) }
    }

    /// Lets a held-back partition go (``FlowControl/unpark(_:)``).
    func unpark(_ partition: PartitionID) {
        self.state.withLock { state in self.apply(state.flow.unpark(partition)) }
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
        await self.waitUntil(timeout: timeout) { $0.isEmpty }
    }

    /// Waits until `condition` holds for the levels and pause state, checked at once and after every change, or
    /// `timeout` passes; `true` when it held. For shutdown's drain and for tests: nothing on the hot path waits here.
    func waitUntil(timeout: Duration, _ condition: @escaping @Sendable (FlowControl) -> Bool) async -> Bool {
        await self.state.wait(deadline: .now + timeout) { state in condition(state.flow) ? () : nil }.value != nil
    }

    /// Called inside the lock.
    private func apply(_ effect: FlowControl.Effect) {
        switch effect {
        case .none: break
        case .pause(let partitions): self.source.pause(partitions)
        case .resume(let partitions): self.source.resume(partitions)
        case .pauseAndResume(let paused, let resumed):
            self.source.pause(paused)
            self.source.resume(resumed)
        }
    }
}
