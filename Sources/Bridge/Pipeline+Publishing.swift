import Synchronization

extension Pipeline {
    /// Hands a notification's records (its outcome, and maybe an invalid-token record) to the sink without
    /// waiting, for the thread a notification's answer came in on. Once every one is acknowledged, `finished`
    /// runs (on the sink's thread); it marks the piece finished, then returns the piece's room: marking first
    /// matters, because the drain waits for the room and must find every finished offset already stored when it
    /// closes the source. A record the sink cannot take at once goes to `later` with its acknowledgement, for
    /// ``publishLater(_:acknowledged:)`` in a task.
    ///
    /// A record the sink fails is published again after a backoff, until acknowledged: an unacknowledged
    /// record must never let its event be committed. Retries stop once the drain timed out.
    func publishNow(
        _ record: OutgoingRecord, _ other: OutgoingRecord?, finished: @escaping @Sendable () -> Void,
        later: (OutgoingRecord, _ acknowledged: @escaping @Sendable () -> Void) -> Void
    ) {
        // One record (the common case) needs no countdown: its acknowledgement is `finished` itself.
        let each = other == nil ? finished : Self.countdown(2, then: finished)
        func publish(_ record: OutgoingRecord) {
            let handler = self.answerHandler(record, attempt: 0, refit: nil, failing: nil, acknowledged: each)
            if !self.sink.publishNow(record, acknowledged: handler) {
                later(record, each)
            }
        }
        publish(record)
        if let other { publish(other) }
    }

    /// Publishes a record ``publishNow(_:_:finished:later:)`` could not hand over at once (its
    /// acknowledgement already returns the room).
    func publishLater(_ record: OutgoingRecord, acknowledged: @escaping @Sendable () -> Void) async {
        await self.publish(record, attempt: 0, refit: nil, failing: nil, acknowledged: acknowledged)
    }

    /// What a single record (a dead letter) calls once acknowledged: `acknowledged`, then the piece's room is
    /// returned.
    private func acknowledgement(bytes: Int, acknowledged: @escaping @Sendable () -> Void) -> @Sendable () -> Void {
        { [self] in
            acknowledged()
            self.releaseRoom(bytes: bytes)
        }
    }

    /// A closure that runs `body` on its `count`th call.
    private static func countdown(_ count: Int, then body: @escaping @Sendable () -> Void) -> @Sendable () -> Void {
        let countdown = Countdown(count)
        return { if countdown.countDown() { body() } }
    }

    /// Publishes one record that can be made smaller (a dead letter): when the sink answers that it is too
    /// large, `refit` makes it again within half the bytes, down to ``minimumRefitBytes``.
    func publish(
        _ record: OutgoingRecord, bytes: Int, refit: @escaping @Sendable (_ maxBytes: Int) -> OutgoingRecord,
        acknowledged: @escaping @Sendable () -> Void
    ) async {
        let budget = RefitBudget(maxBytes: self.configuration.maxRecordBytes, refit: refit)
        await self.publish(
            record, attempt: 0, refit: budget, failing: nil,
            acknowledged: self.acknowledgement(bytes: bytes, acknowledged: acknowledged))
    }

    /// The smallest size a dead letter is cut down to when the broker keeps refusing it as too large.
    static let minimumRefitBytes = 4096

    private func publish(
        _ record: OutgoingRecord, attempt: Int, refit: RefitBudget?, failing: UInt64?,
        acknowledged: @escaping @Sendable () -> Void
    ) async {
        await self.sink.publish(
            record, acknowledged: self.answerHandler(record, attempt: attempt, refit: refit, failing: failing,
                acknowledged: acknowledged))
    }

    /// Handles the sink's answer for `record`: acknowledged, or published again after a backoff (cut down first
    /// when too large and `refit` allows).
    private func answerHandler(
        _ record: OutgoingRecord, attempt: Int, refit: RefitBudget?, failing: UInt64?,
        acknowledged: @escaping @Sendable () -> Void
    ) -> @Sendable ((any Error)?) -> Void {
        { [self] error in
            guard let error else {
                if let failing { self.unpublished.remove(failing) }
                return acknowledged()
            }
            let attempt = attempt + 1
            var record = record
            var refit = refit
            if error is RecordTooLargeError, let budget = refit, budget.maxBytes > Self.minimumRefitBytes {
                // The broker's limit is below the producer's (a topic's max.message.bytes): cut it down further.
                let smaller = budget.halved(minimum: Self.minimumRefitBytes)
                record = smaller.refit(smaller.maxBytes)
                refit = smaller
            }
            let failing = failing.map { self.unpublished.update($0, error: "\(error)") }
                ?? self.unpublished.add(error: "\(error)")
            self.metrics.unpublishedRecords.record(self.unpublished.count)
            self.logger.warning(
                "Publishing a record failed; retrying",
                metadata: ["kafka.topic": "\(record.topic)", "error": "\(error)", "pipeline.attempt": "\(attempt)"]
            )
            Task {
                try? await Task.sleep(for: self.configuration.publishBackoff.delay(afterAttempt: attempt))
                guard !self.isAbandoned else {
                    self.unpublished.remove(failing)
                    return
                }
                await self.publish(record, attempt: attempt, refit: refit, failing: failing, acknowledged: acknowledged)
            }
        }
    }
}

/// How large a refittable record may be made now, and how to make it.
struct RefitBudget: Sendable {
    var maxBytes: Int
    let refit: @Sendable (_ maxBytes: Int) -> OutgoingRecord

    func halved(minimum: Int) -> RefitBudget {
        RefitBudget(maxBytes: max(minimum, self.maxBytes / 2), refit: self.refit)
    }
}

/// The records Kafka failed that are being published again, with when each first failed: what makes
/// `/readyz` fail once one waits longer than `outcomes.publish_stall_timeout`.
final class UnpublishedRecords: Sendable {
    private struct Entry {
        var since: ContinuousClock.Instant
        var error: String
    }

    private struct State {
        var nextID: UInt64 = 0
        var entries: [UInt64: Entry] = [:]
    }

    private let state = Mutex(State())

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
    var count: Int { self.state.withLock { $0.entries.count } }

    /// The record failing longest: how long, its last error, and how many fail.
    func oldest() -> (age: Duration, error: String, count: Int)? {
        self.state.withLock { state in
            guard let oldest = state.entries.values.min(by: { $0.since < $1.since }) else { return nil }
            return (ContinuousClock.now - oldest.since, oldest.error, state.entries.count)
        }
    }

    private static func bounded(_ text: String) -> String {
        RecordText.bounded(text, maxBytes: Self.maximumErrorBytes)
    }
}

/// Counts acknowledgements down to zero from any thread.
final class Countdown: Sendable {
    private let remaining: Atomic<Int>

    init(_ count: Int) {
        self.remaining = Atomic(count)
    }

    /// Counts one down; `true` for the one that reached zero.
    func countDown() -> Bool {
        self.remaining.subtract(1, ordering: .acquiringAndReleasing).newValue == 0
    }
}

/// Shares an event's bytes out among its pieces: every piece gets the quotient, the first one the remainder
/// too, so the shares add up to the event's size exactly.
struct PieceBytes {
    private let quotient: Int
    private var remainder: Int

    init(eventBytes: Int, pieces: Int) {
        let pieces = max(1, pieces)
        self.quotient = eventBytes / pieces
        self.remainder = eventBytes % pieces
    }

    mutating func next() -> Int {
        defer { self.remainder = 0 }
        return self.quotient + self.remainder
    }
}

extension Duration {
    /// Whole seconds, rounded down.
    var wholeSeconds: Int64 { self.components.seconds }
}
