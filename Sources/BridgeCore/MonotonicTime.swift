/// A reading of the monotonic clock as a `Duration` since the process's first reading.
///
/// `ContinuousClock.Instant` is not a frozen type of the standard library, so its size is known only at run time: a
/// struct, array element or closure context that holds one is laid out at run time too, and every access to it goes
/// through the type's metadata and value witnesses (a metadata lookup and a `memmove` per copy). `Duration` is frozen,
/// so what the hot path stores (when an event began, when a request went out) is one of these instead.
package struct MonotonicTime: Sendable, Comparable {
    /// The time since ``origin``.
    package var sinceOrigin: Duration

    /// The clock's reading that every ``MonotonicTime`` counts from.
    private static let origin = ContinuousClock.now

    /// Now.
    package static var now: MonotonicTime { MonotonicTime(ContinuousClock.now) }

    /// The reading `instant`.
    package init(_ instant: ContinuousClock.Instant) {
        self.sinceOrigin = instant - Self.origin
    }

    /// The same reading as an instant of the clock.
    package var instant: ContinuousClock.Instant { Self.origin + self.sinceOrigin }

    package static func < (lhs: MonotonicTime, rhs: MonotonicTime) -> Bool {
        lhs.sinceOrigin < rhs.sinceOrigin
    }

    package static func - (lhs: MonotonicTime, rhs: MonotonicTime) -> Duration {
        lhs.sinceOrigin - rhs.sinceOrigin
    }
}
