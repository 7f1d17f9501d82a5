/// Exponential backoff with full jitter: attempt `n` (1-based) waits a random time in
/// `[0, min(max, initial * 2^(n-1))]`, so many notifications that failed together do not retry together.
package struct Backoff: Sendable, Hashable {
    /// The upper bound of the first wait.
    package var initial: Duration
    /// The largest wait ever returned.
    package var maximum: Duration

    /// Creates a backoff policy; `maximum` is raised to `initial` when it is smaller.
    package init(initial: Duration, maximum: Duration) {
        self.initial = initial
        self.maximum = max(initial, maximum)
    }

    /// The ceiling of the wait before attempt `attempt + 1`, after `attempt` failures (`attempt` ≥ 1).
    package func ceiling(afterAttempt attempt: Int) -> Duration {
        let exponent = min(max(attempt - 1, 0), 62)
        var ceiling = self.initial
        for _ in 0..<exponent {
            ceiling = ceiling * 2
            if ceiling >= self.maximum { return self.maximum }
        }
        return min(ceiling, self.maximum)
    }

    /// A jittered wait before the next attempt, after `attempt` failures.
    package func delay(afterAttempt attempt: Int, using generator: inout some RandomNumberGenerator) -> Duration {
        let ceiling = self.ceiling(afterAttempt: attempt)
        let nanoseconds = ceiling.saturatedNanoseconds
        guard nanoseconds > 0 else { return .zero }
        return .nanoseconds(Int64.random(in: 0...nanoseconds, using: &generator))
    }

    /// A jittered wait with the system random number generator. It calls `Int64.random(in:)` directly rather
    /// than passing a local `SystemRandomNumberGenerator` by `inout`: ThreadSanitizer reported the generic
    /// path's access to that (stateless) generator's metadata from two tasks (docs/fuzzing.md).
    package func delay(afterAttempt attempt: Int) -> Duration {
        let nanoseconds = self.ceiling(afterAttempt: attempt).saturatedNanoseconds
        guard nanoseconds > 0 else { return .zero }
        return .nanoseconds(Int64.random(in: 0...nanoseconds))
    }
}

extension Duration {
    /// Whole nanoseconds, saturated at `Int64.min`/`.max` (about 292 years) instead of trapping: durations come
    /// from configuration and servers.
    var saturatedNanoseconds: Int64 { self.saturated(unitsPerSecond: 1_000_000_000) }

    /// Whole units of `1 / unitsPerSecond` seconds, rounded toward zero, saturated at `Int64.min`/`.max`.
    func saturated(unitsPerSecond: Int64) -> Int64 {
        let (seconds, attoseconds) = self.components
        let (whole, overflow) = seconds.multipliedReportingOverflow(by: unitsPerSecond)
        if overflow { return seconds < 0 ? .min : .max }
        let (total, overflowAgain) = whole.addingReportingOverflow(
            attoseconds / (1_000_000_000_000_000_000 / unitsPerSecond))
        if overflowAgain { return seconds < 0 ? .min : .max }
        return total
    }
}
