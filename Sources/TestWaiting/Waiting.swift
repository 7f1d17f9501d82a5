import Testing
import Waiting

// The tests' ways to wait, in one module that depends only on `Waiting`, so that every test target can use them
// (the pipeline core's tests link no I/O library). Prefer awaiting an event (``waitUntil(_:_:timeout:_:)`` on an
// `AsyncCondition`, `ProcessOutput` for a child's output); poll only state that has none.

/// What a wait throws when what it waits for does not happen in time.
package struct TimedOut: Error, CustomStringConvertible {
    /// What was awaited, for the message.
    package var what: String

    /// Creates the error.
    package init(what: String) {
        self.what = what
    }

    package var description: String { "timed out waiting for \(self.what)" }
}

/// Runs `body`; throws ``TimedOut`` naming `what` when `timeout` passes first (`body` is then cancelled).
package func withTimeout<Result: Sendable>(
    _ timeout: Duration,
    _ what: String,
    _ body: @escaping @Sendable () async throws -> Result
) async throws -> Result {
    try await withThrowingTaskGroup(of: Result.self) { group in
        group.addTask { try await body() }
        group.addTask {
            try await Task.sleep(for: timeout)
            throw TimedOut(what: what)
        }
        defer { group.cancelAll() }
        return try await group.next()!
    }
}

/// What `body` returns, or `nil` when `timeout` passes first (`body` is then cancelled).
package func withTimeout<Result: Sendable>(
    _ timeout: Duration,
    _ body: @escaping @Sendable () async -> Result?
) async -> Result? {
    await withTaskGroup(of: Result?.self) { group in
        group.addTask { await body() }
        group.addTask {
            try? await Task.sleep(for: timeout)
            return nil
        }
        let first = await group.next() ?? nil
        group.cancelAll()
        return first
    }
}

/// Polls `condition` every `interval` until it holds or `timeout` passes; returns whether it held in the end. The
/// default only says "it did not hang": it costs nothing when the condition holds early, and leaves room for a host
/// twice as slow running the whole suite with one core busy (docs/testing.md).
package func eventually(
    timeout: Duration = .seconds(30),
    every interval: Duration = .milliseconds(10),
    _ condition: () async -> Bool
) async throws -> Bool {
    let deadline = ContinuousClock.now + timeout
    while ContinuousClock.now < deadline {
        if await condition() { return true }
        try await Task.sleep(for: interval)
    }
    return await condition()
}

/// Waits until `condition` holds for `state`'s value, checked at once and after every change of it; when it does not
/// hold within `timeout`, records an issue naming `what` and throws. The one wait for state a test double or a server
/// in the test keeps: it polls nothing.
package func waitUntil<State: Sendable>(
    _ what: String,
    _ state: AsyncCondition<State>,
    timeout: Duration = .seconds(60),
    _ condition: @escaping @Sendable (State) -> Bool
) async throws {
    let result = await state.wait(deadline: .now + timeout) { condition($0) ? () : nil }
    try requireInTime(result.value != nil, what, within: timeout)
}

/// Unless `held`, records an issue naming `what` and throws ``TimedOut``: how every bounded wait of the tests ends when
/// what it waited for did not come within `timeout`.
package func requireInTime(_ held: Bool, _ what: String, within timeout: Duration) throws {
    guard held else {
        Issue.record("\(what): not within \(timeout)")
        throw TimedOut(what: what)
    }
}

/// Polls `condition` every `interval` (2 ms unless told); when it does not hold within `timeout`, records an issue and
/// throws. Only for state that has no event to wait on: the pipeline's own counters, which the hot path keeps without a
/// signal; a page a child process serves.
package func waitUntil(
    timeout: Duration = .seconds(60), every interval: Duration = .milliseconds(2), _ condition: () async -> Bool
) async throws {
    try requireInTime(
        try await eventually(timeout: timeout, every: interval, condition), "a condition", within: timeout)
}
