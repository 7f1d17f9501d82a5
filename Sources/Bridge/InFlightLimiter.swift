import DequeModule
import Synchronization

/// Bounds the notifications in flight (`kafka.max_in_flight`, SPEC §4 backpressure): ``acquire()`` suspends
/// while the bound is reached, so the consumer stops taking events instead of buffering them.
///
/// It also reports when it becomes full and when it has room again, so the pipeline can pause and resume
/// fetching; and it lets shutdown wait until nothing is in flight.
final class InFlightLimiter: Sendable {
    private struct State {
        var inFlight = 0
        var full = false
        var waiters: Deque<CheckedContinuation<Void, Never>> = []
        var emptyWaiters: [CheckedContinuation<Void, Never>] = []
    }

    /// The most permits out at once.
    let limit: Int
    /// Below this many in flight after being full, ``onRoom`` is called.
    let resumeBelow: Int
    private let state = Mutex(State())
    private let onFull: @Sendable () -> Void
    private let onRoom: @Sendable () -> Void
    private let onChange: @Sendable (Int) -> Void

    /// - Parameters:
    ///   - limit: the bound (at least 1).
    ///   - onFull: called when an acquire finds the bound reached (pause fetching).
    ///   - onRoom: called when, after being full, in-flight falls to three quarters of the bound (resume).
    ///   - onChange: called with the new in-flight count (the `pushbridge_in_flight` gauge).
    init(
        limit: Int,
        onFull: @escaping @Sendable () -> Void = {},
        onRoom: @escaping @Sendable () -> Void = {},
        onChange: @escaping @Sendable (Int) -> Void = { _ in }
    ) {
        self.limit = max(1, limit)
        self.resumeBelow = max(1, self.limit * 3 / 4)
        self.onFull = onFull
        self.onRoom = onRoom
        self.onChange = onChange
    }

    /// The permits currently out.
    var inFlight: Int { self.state.withLock { $0.inFlight } }

    /// Takes a permit, waiting while `limit` are out. Permits are handed over in FIFO order.
    func acquire() async {
        enum Decision { case acquired(Int), wait(becameFull: Bool) }
        let decision: Decision = self.state.withLock { state in
            if state.inFlight < self.limit && state.waiters.isEmpty {
                state.inFlight += 1
                return .acquired(state.inFlight)
            }
            let becameFull = !state.full
            state.full = true
            return .wait(becameFull: becameFull)
        }
        switch decision {
        case .acquired(let count):
            self.onChange(count)
        case .wait(let becameFull):
            if becameFull { self.onFull() }
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let granted: Bool = self.state.withLock { state in
                    if state.inFlight < self.limit && state.waiters.isEmpty {
                        state.inFlight += 1
                        return true
                    }
                    state.waiters.append(continuation)
                    return false
                }
                if granted { continuation.resume() }
            }
            self.onChange(self.inFlight)
        }
    }

    /// Returns a permit; wakes the oldest waiter, if any.
    func release() {
        let (waiter, room, empty, count) = self.state.withLock {
            state -> (CheckedContinuation<Void, Never>?, Bool, [CheckedContinuation<Void, Never>], Int) in
            if let waiter = state.waiters.popFirst() {
                // The permit passes straight to the waiter: in-flight stays the same.
                return (waiter, false, [], state.inFlight)
            }
            state.inFlight -= 1
            var room = false
            if state.full && state.inFlight <= self.resumeBelow {
                state.full = false
                room = true
            }
            var empty: [CheckedContinuation<Void, Never>] = []
            if state.inFlight == 0 {
                empty = state.emptyWaiters
                state.emptyWaiters.removeAll()
            }
            return (nil, room, empty, state.inFlight)
        }
        if let waiter {
            waiter.resume()
            return
        }
        self.onChange(count)
        if room { self.onRoom() }
        for continuation in empty { continuation.resume() }
    }

    /// Waits until no permit is out, or `timeout` passes. Returns `true` when drained.
    func waitUntilEmpty(timeout: Duration) async -> Bool {
        if self.inFlight == 0 { return true }
        return await withTaskGroup(of: Bool.self) { group in
            group.addTask {
                await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                    let done: Bool = self.state.withLock { state in
                        if state.inFlight == 0 { return true }
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
                let waiters = self.state.withLock { state in
                    defer { state.emptyWaiters.removeAll() }
                    return state.emptyWaiters
                }
                for waiter in waiters { waiter.resume() }
            }
            group.cancelAll()
            return first
        }
    }
}
