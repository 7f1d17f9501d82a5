import Synchronization

/// A state behind a lock that tasks can wait on: the one way PushBridge waits for a signal.
///
/// A task waits for a *condition*: a closure over the state that returns a value once it holds (it may change the
/// state as it does, to take what it waited for) and `nil` while it does not. The condition is checked at once, and
/// then again after every change made through ``withLock(_:)``, under the same lock, so no change can slip between
/// a check and the wait. A waiter that is resumed was resumed for a reason the state shows.
///
/// - Register: ``wait(inTurn:deadline:until:)``.
/// - Resume one or all: every waiter whose condition holds after a change is resumed. Waiters that wait *in turn*
///   are served in the order they came: while the oldest one's condition does not hold, later in-turn waiters are
///   not checked. Waiters that do not wait in turn are checked after every change, in any order.
/// - Cancel: a waiting task that is cancelled returns ``WaitResult/cancelled`` at once, and its condition is never
///   checked again. When it was the oldest in-turn waiter, the waiters are checked again without it: a later one
///   that only waited for its turn resumes.
/// - Deadline: a wait with a deadline returns ``WaitResult/timedOut`` once it passes; it leaves the line as a
///   cancelled wait does.
///
/// A change resumes waiters after the lock is released. Checking costs nothing while nobody waits.
public final class AsyncCondition<State: Sendable>: Sendable {
    /// How a wait ended.
    public enum WaitResult<Value: Sendable>: Sendable {
        /// The condition held and returned this value.
        case satisfied(Value)
        /// The deadline passed first.
        case timedOut
        /// The waiting task was cancelled first.
        case cancelled

        /// The condition's value, or `nil` when the wait timed out or was cancelled.
        public var value: Value? {
            if case .satisfied(let value) = self { return value }
            return nil
        }
    }

    @usableFromInline
    struct Waiter {
        @usableFromInline let id: UInt64
        @usableFromInline let inTurn: Bool
        /// Checks the condition under the lock; returns what resumes the waiter once it holds.
        @usableFromInline let check: (inout State) -> (@Sendable () -> Void)?
        /// Resumes the waiter with ``WaitResult/cancelled`` (or timed out).
        @usableFromInline let abandon: @Sendable () -> Void
    }

    @usableFromInline
    struct Storage {
        @usableFromInline var state: State
        @usableFromInline var waiters: [Waiter] = []
        @usableFromInline var inTurnCount = 0
        @usableFromInline var nextID: UInt64 = 0
        /// Waiters ``checkWaiters()`` moved to close the gaps resumed ones left, over the condition's life: each
        /// waiter left moves once per check at most, so waking n waiters is O(n). Counted for the tests that hold
        /// it to that.
        @usableFromInline var waitersMoved = 0

        @usableFromInline
        init(state: State) {
            self.state = state
        }

        /// Checks the waiters in the order they came; removes those whose condition holds and returns what
        /// resumes them. Inlinable, so that it is specialised for the state where it is used: it runs after every
        /// change while someone waits (a release of room while the consumer waits for it), and the generic version
        /// looked the types' metadata up on each call.
        @inlinable
        mutating func checkWaiters() -> [@Sendable () -> Void] {
            // In place, without copying a waiter while nobody is resumed: this runs after every change while someone
            // waits (a full line checks its waiting consumer on every release), and usually resumes nobody. The
            // waiters left are compacted in one pass (the first `kept` places hold them, in order; the resumed ones
            // end up behind and are cut off at once): removing each resumed one on its own would move all the
            // waiters behind it, O(n²) for a change that resumes many, under the lock.
            var resumptions: [@Sendable () -> Void] = []
            var blocked = false
            var kept = 0
            for index in self.waiters.indices {
                let inTurn = self.waiters[index].inTurn
                if !(inTurn && blocked), let resume = self.waiters[index].check(&self.state) {
                    resumptions.append(resume)
                    if inTurn { self.inTurnCount -= 1 }
                    continue
                }
                if inTurn { blocked = true }
                if kept != index {
                    self.waiters.swapAt(kept, index)
                    self.waitersMoved += 1
                }
                kept += 1
            }
            if kept < self.waiters.count { self.waiters.removeLast(self.waiters.count - kept) }
            return resumptions
        }

        /// The condition's value now, unless it waits in turn and an earlier in-turn waiter still waits (then it is
        /// not checked).
        @usableFromInline
        mutating func checkNow<Value>(inTurn: Bool, _ condition: (inout State) -> Value?) -> Value? {
            if inTurn && self.inTurnCount > 0 { return nil }
            return condition(&self.state)
        }

        /// Removes a waiter that was cancelled or timed out; `nil` when it is no longer there (resumed already).
        ///
        /// When it was the oldest in-turn waiter, it was what kept the in-turn waiters behind it from being checked:
        /// the waiters are checked again, as after a change, and what resumes those whose condition now holds is
        /// returned with it. Removing any other waiter frees nobody, and checks nothing.
        mutating func remove(_ id: UInt64) -> (waiter: Waiter, resumptions: [@Sendable () -> Void])? {
            guard let index = self.waiters.firstIndex(where: { $0.id == id }) else { return nil }
            let waiter = self.waiters.remove(at: index)
            guard waiter.inTurn else { return (waiter, []) }
            self.inTurnCount -= 1
            let wasOldestInTurn = !self.waiters[..<index].contains { $0.inTurn }
            return (waiter, wasOldestInTurn && self.inTurnCount > 0 ? self.checkWaiters() : [])
        }
    }

    @usableFromInline
    let storage: Mutex<Storage>

    /// Creates the condition around `state`.
    public init(_ state: State) {
        self.storage = Mutex(Storage(state: state))
    }

    /// Reads or changes the state under the lock; then resumes every waiter whose condition now holds.
    @inlinable
    public func withLock<Result>(_ body: (inout State) throws -> Result) rethrows -> Result {
        try self.withLock(body, settle: { _, _ in })
    }

    /// ``withLock(_:)``, then `settle` under the same lock once the waiters were checked, with how many in-turn
    /// waiters still wait: for a change whose last step depends on whether anybody is left waiting.
    @inlinable
    public func withLock<Result>(
        _ body: (inout State) throws -> Result,
        settle: (inout State, _ waitingInTurn: Int) -> Void
    ) rethrows -> Result {
        let (result, resumptions) = try self.storage.withLock { storage in
            let result = try body(&storage.state)
            let resumptions = storage.waiters.isEmpty ? [] : storage.checkWaiters()
            settle(&storage.state, storage.inTurnCount)
            return (result, resumptions)
        }
        for resume in resumptions { resume() }
        return result
    }

    /// How many tasks wait now (for tests and gauges).
    public var waiting: Int { self.storage.withLock { $0.waiters.count } }

    /// Reads the state under the lock; nobody is resumed (reading changes nothing).
    @inlinable
    public func read<Result>(_ body: (State) throws -> Result) rethrows -> Result {
        try self.storage.withLock { storage in try body(storage.state) }
    }

    /// Waits until `condition` returns a value, the `deadline` passes, or the calling task is cancelled.
    ///
    /// `condition` runs under the lock: once now, then after every change through ``withLock(_:)`` until it
    /// returns a value. It may change the state (to take what it waited for); it must be quick and must not call
    /// back into this condition.
    ///
    /// - Parameters:
    ///   - inTurn: wait in the order of arrival among the in-turn waiters (room handed out first come, first
    ///     served); the condition is not even checked now while an earlier in-turn waiter still waits.
    ///   - deadline: when to give up; `nil` waits for as long as it takes.
    @inlinable
    public func wait<Value: Sendable>(
        inTurn: Bool = false,
        deadline: ContinuousClock.Instant? = nil,
        until condition: @escaping @Sendable (inout State) -> Value?
    ) async -> WaitResult<Value> {
        if let value = self.check(inTurn: inTurn, condition) { return .satisfied(value) }
        return await self.waitAfterCheck(inTurn: inTurn, deadline: deadline, condition)
    }

    /// What ``wait(inTurn:deadline:until:)`` would find at once, without waiting: the condition's value, or `nil`
    /// when it does not hold (or, `inTurn`, when an earlier in-turn waiter still waits, and the condition is not
    /// checked).
    @inlinable
    public func check<Value: Sendable>(inTurn: Bool = false, _ condition: @Sendable (inout State) -> Value?) -> Value? {
        self.storage.withLock { storage in storage.checkNow(inTurn: inTurn, condition) }
    }

    @usableFromInline
    func waitAfterCheck<Value: Sendable>(
        inTurn: Bool,
        deadline: ContinuousClock.Instant?,
        _ condition: @escaping @Sendable (inout State) -> Value?
    ) async -> WaitResult<Value> {
        guard let deadline else { return await self.suspend(inTurn: inTurn, condition) }
        if ContinuousClock.now >= deadline { return .timedOut }
        return await withTaskGroup(of: WaitResult<Value>?.self) { group in
            group.addTask { await self.suspend(inTurn: inTurn, condition) }
            group.addTask {
                // `nil`: the deadline passed, or the wait ended first and cancelled this sleep.
                try? await Task.sleep(until: deadline, clock: .continuous)
                return nil
            }
            var result: WaitResult<Value>?
            while let next = await group.next() {
                if let next {
                    result = next
                    break
                }
                // The sleep ended: stop the wait, and take its answer (it may have been satisfied meanwhile).
                group.cancelAll()
            }
            group.cancelAll()
            switch result {
            case .satisfied(let value)?: return .satisfied(value)
            case .timedOut?, .cancelled?, nil: return Task.isCancelled ? .cancelled : .timedOut
            }
        }
    }

    private func suspend<Value: Sendable>(
        inTurn: Bool,
        _ condition: @escaping @Sendable (inout State) -> Value?
    ) async -> WaitResult<Value> {
        let id = self.storage.withLock { storage in
            storage.nextID &+= 1
            return storage.nextID
        }
        return await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<WaitResult<Value>, Never>) in
                let now: WaitResult<Value>? = self.storage.withLock { storage in
                    // Cancelled before this lock: the cancellation handler found nothing to remove.
                    if Task.isCancelled { return .cancelled }
                    if let value = storage.checkNow(inTurn: inTurn, condition) { return .satisfied(value) }
                    storage.waiters.append(
                        Waiter(
                            id: id,
                            inTurn: inTurn,
                            check: { state in
                                guard let value = condition(&state) else { return nil }
                                return { continuation.resume(returning: .satisfied(value)) }
                            },
                            abandon: { continuation.resume(returning: .cancelled) }
                        ))
                    if inTurn { storage.inTurnCount += 1 }
                    return nil
                }
                if let now { continuation.resume(returning: now) }
            }
        } onCancel: {
            // Also how a deadline ends the wait: the sleep that passed cancels it.
            guard let removed = self.storage.withLock({ $0.remove(id) }) else { return }
            removed.waiter.abandon()
            for resume in removed.resumptions { resume() }
        }
    }
}

/// A one-way flag (closed, stopped) that tasks wait for.
extension AsyncCondition where State == Bool {
    /// Sets the flag: every task waiting for it resumes.
    public func set() {
        self.withLock { $0 = true }
    }

    /// Waits until the flag is set: `true`; `false` when the `deadline` passed first or the task was cancelled.
    public func waitUntilSet(deadline: ContinuousClock.Instant? = nil) async -> Bool {
        await self.wait(deadline: deadline) { $0 ? () : nil }.value != nil
    }
}
