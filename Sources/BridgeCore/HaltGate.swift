import Waiting

/// Stops the line on a systemic fault (docs/operations.md, "Guarantees"): while halted, nothing new is sent, and senders wait here
/// until a probe finds APNs accepting again.
///
/// Waiting is cheap: a notification that arrives while the gate is closed suspends without a timer, and
/// ``resume()`` wakes every waiter at once.
package final class HaltGate: Sendable {
    /// Why the line stopped, and since when.
    package struct Halt: Sendable, Hashable {
        /// A human-readable reason, naming the app and Apple's reason (e.g. `app default: InvalidProviderToken`).
        package var reason: String
        /// When the line stopped, from ``ContinuousClock``.
        package var since: ContinuousClock.Instant
    }

    /// The current halt: `nil` while the line runs.
    private let state = AsyncCondition<Halt?>(nil)
    private let onChange: @Sendable (Halt?) -> Void

    /// Creates an open gate; `onChange` hears every halt and resume (for the `pushbridge_halted` metric, logs
    /// and pausing), inside the gate's lock: it must be quick and must not call back into the gate.
    package init(onChange: @escaping @Sendable (Halt?) -> Void = { _ in }) {
        self.onChange = onChange
    }

    /// The current halt, or `nil` while the line runs.
    package var current: Halt? {
        self.state.read { $0 }
    }

    /// Closes the gate for `reason`. A gate already closed keeps its first reason and start time.
    ///
    /// Returns `true` when this call closed the gate: that caller probes APNs and calls ``resume()`` once it
    /// accepts again; everyone else waits in ``waitUntilOpen()``.
    @discardableResult
    package func halt(reason: String) -> Bool {
        self.state.withLock { current in
            guard current == nil else { return false }
            let halt = Halt(reason: reason, since: .now)
            current = halt
            // Told inside the lock: a halt and a resume from two threads reach `onChange` in the order they
            // happened, so the pause they cause cannot outlive the halt.
            self.onChange(halt)
            return true
        }
    }

    /// Opens the gate and wakes every waiter.
    package func resume() {
        self.state.withLock { current in
            guard current != nil else { return }
            current = nil
            self.onChange(nil)
        }
    }

    /// The halt once the gate is closed (at once if it is); `nil` when `deadline` passed first, or the calling task
    /// was cancelled. For what watches the line (a test, an operator's tool) rather than waits to send.
    package func waitUntilHalted(deadline: ContinuousClock.Instant) async -> Halt? {
        guard case .satisfied(let halt) = await self.state.wait(deadline: deadline, until: { $0 }) else {
            return nil
        }
        return halt
    }

    /// Returns at once while the gate is open; otherwise waits until it opens. Throws `CancellationError`
    /// when the calling task is cancelled while waiting.
    package func waitUntilOpen() async throws {
        guard case .satisfied = await self.state.wait(until: { $0 == nil ? () : nil }) else {
            throw CancellationError()
        }
    }
}
