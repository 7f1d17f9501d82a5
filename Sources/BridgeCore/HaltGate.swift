import Synchronization

/// Stops the line on a systemic fault (docs/operations.md, "Guarantees"): while halted, nothing new is sent, and senders wait here
/// until a probe finds APNs accepting again.
///
/// Waiting is cheap: a notification that arrives while the gate is closed suspends without a timer, and
/// ``resume()`` wakes every waiter at once.
public final class HaltGate: Sendable {
    /// Why the line stopped, and since when.
    public struct Halt: Sendable, Hashable {
        /// A human-readable reason, naming the app and Apple's reason (e.g. `app default: InvalidProviderToken`).
        public var reason: String
        /// When the line stopped, from ``ContinuousClock``.
        public var since: ContinuousClock.Instant
    }

    private struct State {
        var halt: Halt?
        var nextWaiterID: UInt64 = 0
        var waiters: [UInt64: CheckedContinuation<Void, any Error>] = [:]
    }

    private let state = Mutex(State())
    private let onChange: @Sendable (Halt?) -> Void

    /// Creates an open gate; `onChange` hears every halt and resume (for the `pushbridge_halted` metric, logs
    /// and pausing), inside the gate's lock: it must be quick and must not call back into the gate.
    public init(onChange: @escaping @Sendable (Halt?) -> Void = { _ in }) {
        self.onChange = onChange
    }

    /// The current halt, or `nil` while the line runs.
    public var current: Halt? {
        self.state.withLock { $0.halt }
    }

    /// Closes the gate for `reason`. A gate already closed keeps its first reason and start time.
    ///
    /// Returns `true` when this call closed the gate: that caller probes APNs and calls ``resume()`` once it
    /// accepts again; everyone else waits in ``waitUntilOpen()``.
    @discardableResult
    public func halt(reason: String) -> Bool {
        self.state.withLock { state in
            guard state.halt == nil else { return false }
            let halt = Halt(reason: reason, since: .now)
            state.halt = halt
            // Told inside the lock: a halt and a resume from two threads reach `onChange` in the order they
            // happened, so the pause they cause cannot outlive the halt.
            self.onChange(halt)
            return true
        }
    }

    /// Opens the gate and wakes every waiter.
    public func resume() {
        let waiters: [CheckedContinuation<Void, any Error>] = self.state.withLock { state in
            guard state.halt != nil else { return [] }
            state.halt = nil
            self.onChange(nil)
            defer { state.waiters.removeAll() }
            return Array(state.waiters.values)
        }
        for waiter in waiters { waiter.resume() }
    }

    /// Returns at once while the gate is open; otherwise waits until it opens. Throws `CancellationError`
    /// when the calling task is cancelled while waiting.
    public func waitUntilOpen() async throws {
        if self.state.withLock({ $0.halt == nil }) { return }
        let id = self.state.withLock { state -> UInt64 in
            state.nextWaiterID += 1
            return state.nextWaiterID
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let resumeNow: Result<Void, any Error>? = self.state.withLock { state in
                    if Task.isCancelled { return .failure(CancellationError()) }
                    if state.halt == nil { return .success(()) }
                    state.waiters[id] = continuation
                    return nil
                }
                if let resumeNow { continuation.resume(with: resumeNow) }
            }
        } onCancel: {
            let waiter = self.state.withLock { $0.waiters.removeValue(forKey: id) }
            waiter?.resume(throwing: CancellationError())
        }
    }
}
