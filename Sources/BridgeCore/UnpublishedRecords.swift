import SafeText
import Synchronization
import Waiting

/// The records Kafka failed that are being published again, with when each first failed: what makes
/// `/readyz` fail once one waits longer than `outcomes.publish_stall_timeout`.
package final class UnpublishedRecords: Sendable {
    private struct Entry {
        var since: ContinuousClock.Instant
        var error: String
    }

    private struct State {
        var nextID: UInt64 = 0
        var entries: [UInt64: Entry] = [:]
    }

    /// Changed only when a record fails, and when a failed one is acknowledged or abandoned: never for a record
    /// published at its first try.
    private let state = AsyncCondition(State())

    /// The longest error text kept: errors come from the broker and the client, and end up in `/readyz`.
    static let maximumErrorBytes = 300

    /// Registers a record's first failure; returns its id.
    func add(error: String) -> UInt64 {
        self.state.withLock { state in
            state.nextID += 1
            state.entries[state.nextID] = Entry(since: .now, error: Self.bounded(error))
            return state.nextID
        }
    }

    /// Another failure of a registered record; returns its id.
    func update(_ id: UInt64, error: String) -> UInt64 {
        self.state.withLock { state in state.entries[id]?.error = Self.bounded(error) }
        return id
    }

    /// The record was acknowledged, or abandoned.
    func remove(_ id: UInt64) {
        self.state.withLock { state in _ = state.entries.removeValue(forKey: id) }
    }

    /// How many records are failing now.
    package var count: Int { self.state.read { $0.entries.count } }

    /// Waits until `count` records are failing, at most `timeout`; `false` when they were not. For tests.
    package func waitFor(count: Int, timeout: Duration) async -> Bool {
        await self.state.wait(deadline: .now + timeout) { $0.entries.count == count ? () : nil }.value != nil
    }

    /// The record failing longest: how long, its last error, and how many fail.
    func oldest() -> (age: Duration, error: String, count: Int)? {
        self.state.withLock { state in
            guard let oldest = state.entries.values.min(by: { $0.since < $1.since }) else { return nil }
            return (ContinuousClock.now - oldest.since, oldest.error, state.entries.count)
        }
    }

    private static func bounded(_ text: String) -> String {
        SafeText.excerpt(text, maxBytes: Self.maximumErrorBytes)
    }
}

extension Duration {
    /// Whole seconds, rounded down.
    var wholeSeconds: Int64 { self.components.seconds }
}
