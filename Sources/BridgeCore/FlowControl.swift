/// Whether fetching runs, decided from levels (docs/operations.md, "Guarantees": backpressure, halt, shutdown): work in flight against
/// `kafka.max_in_flight` and `kafka.max_in_flight_bytes`, the halt, the shutdown, and the assigned
/// partitions. A value without I/O: every call returns the ``Effect`` to apply to the source, so the
/// interleavings of acquires, releases, stalls, halts and rebalances are tested as plain values.
///
/// The rule is level-triggered: after every call, the assigned partitions are paused exactly when the line is
/// stalled (full, and nothing released for a while: ``markStalled()``), halted or shutting down.
/// ``FlowController`` applies each effect inside the same lock that decided it, so a pause and a resume decided
/// on two threads reach the source in the order they were decided.
///
/// A line that is full but moving is not paused: the consumer stops taking events (it waits for room), its
/// bounded buffer fills and the poll thread stops, and librdkafka's prefetch stops at its own byte bound. Pausing
/// it on every fill would make librdkafka drop that prefetch and fetch it again on every resume, several times
/// per second in a backlog (docs/benchmarks.md, "Seventh session").
struct FlowControl: Sendable, Hashable {
    /// The bounds: pieces of work (notifications and dead letters) and the bytes they hold.
    struct Levels: Sendable, Hashable {
        var count: Int
        var bytes: Int
    }

    /// What the source must be told.
    enum Effect: Sendable, Hashable {
        case none
        case pause([PartitionID])
        case resume([PartitionID])
        /// Newly assigned partitions of which some are held back (``park(_:)``) and the others free.
        case pauseAndResume(pause: [PartitionID], resume: [PartitionID])
    }

    /// The most in flight at once. One piece larger than `limits.bytes` still goes through when nothing else
    /// is in flight, so an oversized event cannot stop the line.
    private(set) var limits: Levels
    /// After being full, the waiting consumer gets room (and a stalled line resumes fetching) once in flight falls
    /// to these levels (three quarters of the limits), so a line at its bound is not woken on every
    /// acknowledgement.
    private(set) var resumeLevels: Levels

    private(set) var inFlight = Levels(count: 0, bytes: 0)
    /// Set when work had to wait for room; cleared when in flight falls to ``resumeLevels``.
    private(set) var full = false
    /// Set by ``markStalled()`` while full; cleared with ``full``.
    private(set) var stalled = false
    private(set) var halted = false
    private(set) var shuttingDown = false
    private(set) var assigned: Set<PartitionID> = []
    /// Whether the assigned partitions are paused now (what the source was last told).
    private(set) var paused = false
    /// Partitions held back on their own (``park(_:)``): paused whatever the line does, until ``unpark(_:)``.
    private(set) var parked: Set<PartitionID> = []

    init(maxCount: Int, maxBytes: Int) {
        (self.limits, self.resumeLevels) = Self.levels(maxCount: maxCount, maxBytes: maxBytes)
    }

    /// New bounds (a reload changed a lane's shares). What is in flight stays; above lower bounds, nothing new fits
    /// until enough of it was released.
    mutating func setLimits(maxCount: Int, maxBytes: Int) {
        (self.limits, self.resumeLevels) = Self.levels(maxCount: maxCount, maxBytes: maxBytes)
    }

    private static func levels(maxCount: Int, maxBytes: Int) -> (limits: Levels, resume: Levels) {
        let count = max(1, maxCount)
        let bytes = max(1, maxBytes)
        return (Levels(count: count, bytes: bytes), Levels(count: max(1, count * 3 / 4), bytes: max(1, bytes / 4 * 3)))
    }

    /// Whether fetching must be paused now.
    var shouldPause: Bool { self.stalled || self.halted || self.shuttingDown }

    /// Whether nothing at all is in flight: no piece, and no bytes (a notification waiting in an ordered line holds
    /// bytes without a place in the count).
    var isEmpty: Bool { self.inFlight.count == 0 && self.inFlight.bytes == 0 }

    /// Whether a piece holding `bytes` fits now.
    func fits(bytes: Int) -> Bool {
        if self.isEmpty { return true }
        return self.inFlight.count < self.limits.count && bytes <= self.limits.bytes - self.inFlight.bytes
    }

    /// Whether room goes to waiting pieces now (each takes it while it ``fits(bytes:)``): in flight has fallen to
    /// the ``resumeLevels``, or nothing is in flight. Handing room to the waiting consumer on every single
    /// acknowledgement of a full line would cost it a wake-up per piece; from the resume levels it takes a quarter of
    /// the bound in one go.
    var admitsWaiters: Bool {
        self.isEmpty || self.isDownToResumeLevels
    }

    /// Whether in flight is at or below both ``resumeLevels``.
    private var isDownToResumeLevels: Bool {
        self.inFlight.count <= self.resumeLevels.count && self.inFlight.bytes <= self.resumeLevels.bytes
    }

    /// Takes room for a piece holding `bytes` when it fits and nobody waits before it (`queued`); otherwise
    /// marks the line full. Returns whether room was taken.
    mutating func acquire(bytes: Int, queued: Bool) -> (acquired: Bool, effect: Effect) {
        if !queued && self.fits(bytes: bytes) {
            self.take(bytes: bytes)
            return (true, .none)
        }
        self.full = true
        return (false, self.sync())
    }

    /// Takes room for a waiting piece that ``fits(bytes:)``.
    mutating func take(bytes: Int) {
        self.inFlight.count += 1
        self.inFlight.bytes += max(0, bytes)
    }

    /// Returns a piece's room; ``settle(waiting:)`` follows once waiters that fit were handed room. `count` is 0 for
    /// a piece that had given its place back while it waited in an ordered line (``release(count:bytes:)``).
    mutating func release(bytes: Int, count: Int = 1) {
        self.inFlight.count = max(0, self.inFlight.count - count)
        self.inFlight.bytes = max(0, self.inFlight.bytes - max(0, bytes))
    }

    /// A piece that waited in an ordered line (holding only its bytes) is in flight again: it takes its place in the
    /// count back without waiting. Its line's previous piece just gave its own back, so the count stays where it was.
    mutating func retakePlace() {
        self.inFlight.count += 1
    }

    /// Holds `partition` back on its own: paused now (unless every partition already is) and kept paused when the
    /// line resumes the others, until ``unpark(_:)``.
    mutating func park(_ partition: PartitionID) -> Effect {
        // Also before its assignment is announced (its events can come first): ``assign(_:)`` keeps it paused then.
        guard self.parked.insert(partition).inserted, self.assigned.contains(partition), !self.paused else {
            return .none
        }
        return .pause([partition])
    }

    /// Lets a partition held back by ``park(_:)`` go: resumed unless every partition is paused now.
    mutating func unpark(_ partition: PartitionID) -> Effect {
        guard self.parked.remove(partition) != nil, self.assigned.contains(partition), !self.paused else {
            return .none
        }
        return .resume([partition])
    }

    /// After releases (and hand-overs to waiters): clears `full` once in flight is down to the resume levels
    /// and nobody waits, and says what the source must be told.
    mutating func settle(waiting: Bool) -> Effect {
        if self.full && !waiting && self.isDownToResumeLevels {
            self.full = false
            self.stalled = false
        }
        return self.sync()
    }

    /// The line stays full and nothing was released for the stall time (``FlowController`` watches the clock):
    /// fetching pauses until in flight is down to the ``resumeLevels``. Nothing happens when the line is not full.
    mutating func markStalled() -> Effect {
        guard self.full else { return .none }
        self.stalled = true
        return self.sync()
    }

    mutating func setHalted(_ halted: Bool) -> Effect {
        self.halted = halted
        return self.sync()
    }

    mutating func beginShutdown() -> Effect {
        self.shuttingDown = true
        return self.sync()
    }

    /// New partitions are told the current state: librdkafka keeps a partition's pause flag across revocation
    /// and reassignment, so one paused when it was revoked would otherwise come back paused for good.
    mutating func assign(_ partitions: [PartitionID]) -> Effect {
        self.assigned.formUnion(partitions)
        _ = self.sync()
        guard !partitions.isEmpty else { return .none }
        if self.paused { return .pause(partitions) }
        let held = partitions.filter { self.parked.contains($0) }
        guard !held.isEmpty else { return .resume(partitions) }
        let free = partitions.filter { !self.parked.contains($0) }
        return free.isEmpty ? .pause(held) : .pauseAndResume(pause: held, resume: free)
    }

    mutating func revoke(_ partitions: [PartitionID]) {
        self.assigned.subtract(partitions)
        self.parked.subtract(partitions)
    }

    /// Brings ``paused`` to ``shouldPause``; the effect tells the assigned partitions when it changed.
    private mutating func sync() -> Effect {
        let pause = self.shouldPause
        guard pause != self.paused else { return .none }
        self.paused = pause
        // Resuming leaves the parked partitions paused; pausing them again is harmless.
        let affected = pause ? self.assigned : self.assigned.subtracting(self.parked)
        guard !affected.isEmpty else { return .none }
        let partitions = affected.sorted { ($0.topic, $0.partition) < ($1.topic, $1.partition) }
        return pause ? .pause(partitions) : .resume(partitions)
    }
}
