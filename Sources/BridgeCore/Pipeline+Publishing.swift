import CoreMetrics
import Logging
import Synchronization

extension Pipeline {
    /// Hands a notification's outcome record (and maybe its invalid-token record) to the sink without waiting, for
    /// the thread a notification's answer came in on, with one ``OutcomePublication`` per record as the sink's
    /// acknowledgement instead of a closure per layer (this runs once per notification). Once every record is
    /// acknowledged, the outcome is counted, its piece marked finished, then its room returned: marking first
    /// matters, because the drain waits for the room and must find every finished offset already stored when it
    /// closes the source. A record the sink cannot take at once goes to a task (``publishLater(_:acknowledged:)``).
    ///
    /// A record the sink fails is published again after a backoff, until acknowledged: an unacknowledged
    /// record must never let its event be committed. Retries stop once the drain timed out.
    func publishOutcome(
        _ record: OutgoingRecord, invalidToken other: OutgoingRecord?, of delivery: Delivery,
        status: OutcomeStatus, reason: String?, invalidTokenReason: String?
    ) {
        let finished = FinishedDelivery(
            route: delivery.route, status: status, reason: reason, invalidTokenReason: invalidTokenReason,
            ticket: delivery.ticket, bytes: delivery.bytes,
            places: delivery.holdsPlace.load(ordering: .relaxed) ? 1 : 0,
            lane: delivery.lane)
        let publication = OutcomePublication(pipeline: self, finished: finished, records: other == nil ? 1 : 2)
        publication.publish(record)
        if let other {
            InvalidTokenPublication(outcome: publication).publish(other)
        }
    }

    /// What the outcome's records do once acknowledged, from the sink's thread.
    fileprivate func outcomeAcknowledged(_ finished: FinishedDelivery) {
        if let invalidTokenReason = finished.invalidTokenReason {
            self.metrics.invalidToken(reason: invalidTokenReason)
        }
        self.metrics.notification(route: finished.route, status: finished.status, reason: finished.reason)
        self.pieceFinished(finished.ticket)
        self.releaseRoom(bytes: finished.bytes, places: finished.places, lane: finished.lane)
    }

    /// A record handed over and failed, or one the sink could not take at once: from here on it goes through
    /// the path with retries (``RecordPublication``); `acknowledged` runs once the broker has it.
    fileprivate func publishAgain(
        _ record: OutgoingRecord, after error: (any Error)?, acknowledged: @escaping @Sendable () -> Void
    ) {
        guard let error else {
            self.resumptions.continuation.yield(.publish(record, acknowledged: acknowledged))
            return
        }
        RecordPublication(self, record, refit: nil, acknowledged: acknowledged).failed(error, record: record)
    }

    /// Publishes a record ``publishOutcome(_:invalidToken:of:status:reason:invalidTokenReason:)`` could not hand
    /// over at once (its
    /// acknowledgement already returns the room).
    func publishLater(_ record: OutgoingRecord, acknowledged: @escaping @Sendable () -> Void) async {
        await self.publish(RecordPublication(self, record, refit: nil, acknowledged: acknowledged))
    }

    /// What a single record (a dead letter) calls once acknowledged: `acknowledged`, then the piece's room is
    /// returned.
    private func acknowledgement(
        bytes: Int, lane: Lane?, acknowledged: @escaping @Sendable () -> Void
    ) -> @Sendable () -> Void {
        { [self] in
            acknowledged()
            self.releaseRoom(bytes: bytes, lane: lane)
        }
    }

    /// Publishes one record that can be made smaller (a dead letter): when the sink answers that it is too
    /// large, `refit` makes it again within half the bytes, down to ``minimumRefitBytes``.
    func publish(
        _ record: OutgoingRecord, bytes: Int, lane: Lane?,
        refit: @escaping @Sendable (_ maxBytes: Int) -> OutgoingRecord,
        acknowledged: @escaping @Sendable () -> Void
    ) async {
        let budget = RefitBudget(maxBytes: self.configuration.maxRecordBytes, refit: refit)
        await self.publish(
            RecordPublication(
                self, record, refit: budget,
                acknowledged: self.acknowledgement(bytes: bytes, lane: lane, acknowledged: acknowledged)))
    }

    /// The smallest size a dead letter is cut down to when the broker keeps refusing it as too large.
    static let minimumRefitBytes = 4096

    private func publish(_ publication: RecordPublication) async {
        await self.sink.publish(publication.record, acknowledgement: publication)
    }

    /// Handles the sink's answer for `publication`: acknowledged, or published again after a backoff (cut down
    /// first when too large and its refit budget allows).
    fileprivate func answered(_ publication: RecordPublication, error: (any Error)?) {
        guard let error else {
            if let failing = publication.failing { self.unpublished.remove(failing) }
            return publication.done()
        }
        let attempt = publication.attempt + 1
        var record = publication.record
        var refit = publication.refit
        if error is RecordTooLargeError, let budget = refit, budget.maxBytes > Self.minimumRefitBytes {
            // The broker's limit is below the producer's (a topic's max.message.bytes): cut it down further.
            let smaller = budget.halved(minimum: Self.minimumRefitBytes)
            record = smaller.refit(smaller.maxBytes)
            refit = smaller
        }
        let failing =
            publication.failing.map { self.unpublished.update($0, error: "\(error)") }
            ?? self.unpublished.add(error: "\(error)")
        self.metrics.unpublishedRecords.record(self.unpublished.count)
        self.logger.warning(
            "Publishing a record failed; retrying", error: error,
            metadata: ["kafka.topic": "\(record.topic)", "pipeline.attempt": "\(attempt)"]
        )
        let retry = RecordPublication(
            self, record, attempt: attempt, refit: refit, failing: failing, acknowledged: publication.done)
        if case .terminated = self.resumptions.continuation.yield(.publishAfterBackoff(retry)) {
            // The pipeline finished: nothing waits for this record any more.
            self.unpublished.remove(failing)
        }
    }

    /// Publishes a record Kafka failed once more, after the backoff for its attempt; in a task of ``run()``'s.
    /// Not once the drain gave up on in-flight work, nor once the task is cancelled: a cancelled send fails at once,
    /// and trying it again would go round without waiting (the record's event stays uncommitted instead).
    func publishAfterBackoff(_ retry: RecordPublication) async {
        try? await Task.sleep(for: self.configuration.publishBackoff.delay(afterAttempt: retry.attempt))
        guard !self.isAbandoned, !Task.isCancelled else {
            if let failing = retry.failing { self.unpublished.remove(failing) }
            return
        }
        await self.publish(retry)
    }
}

/// A record published through the path with retries (a dead letter, or an outcome record that failed once or could
/// not be handed over at once), as the sink's acknowledgement, whose answer goes to
/// ``Pipeline/answered(_:error:)``; after a failure, a new one carries the record to
/// ``Pipeline/publishAfterBackoff(_:)``.
final class RecordPublication: RecordAcknowledgement, @unchecked Sendable {
    private let pipeline: Pipeline
    let record: OutgoingRecord
    /// Failed attempts so far.
    let attempt: Int
    let refit: RefitBudget?
    /// Its entry in ``Pipeline/unpublished`` once it failed.
    let failing: UInt64?
    /// What the record's acknowledgement does.
    let done: @Sendable () -> Void

    init(
        _ pipeline: Pipeline, _ record: OutgoingRecord, attempt: Int = 0, refit: RefitBudget?, failing: UInt64? = nil,
        acknowledged: @escaping @Sendable () -> Void
    ) {
        self.pipeline = pipeline
        self.record = record
        self.attempt = attempt
        self.refit = refit
        self.failing = failing
        self.done = acknowledged
        super.init()
    }

    override func acknowledged() {
        self.pipeline.answered(self, error: nil)
    }

    override func failed(_ error: any Error, record: OutgoingRecord) {
        self.pipeline.answered(self, error: error)
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

/// A record of a notification's outcome on its way to the sink, as the sink's acknowledgement: one object per
/// record between the pipeline and the broker (the sink adds its own). It keeps no copy of the record: once the
/// sink has it, the record's bytes are let go on the thread that wrote them, and a failure hands the record back
/// (``RecordAcknowledgement/failed(_:record:)``). A failed record, or one the sink cannot take at once, goes on
/// through the path with retries (``RecordPublication``). Subclasses say what an acknowledged record does.
class OutcomeRecordPublication: RecordAcknowledgement, @unchecked Sendable {
    fileprivate let pipeline: Pipeline

    fileprivate init(pipeline: Pipeline) {
        self.pipeline = pipeline
        super.init()
    }

    fileprivate func publish(_ record: OutgoingRecord) {
        if !self.pipeline.sink.publishNow(record, acknowledgement: self) {
            self.pipeline.publishAgain(record, after: nil, acknowledged: { self.recordDone() })
        }
    }

    override func acknowledged() {
        self.recordDone()
    }

    override func failed(_ error: any Error, record: OutgoingRecord) {
        self.pipeline.publishAgain(record, after: error, acknowledged: { self.recordDone() })
    }

    /// The broker has the record.
    fileprivate func recordDone() {}
}

/// The outcome record itself, which finishes the notification once it (and its invalid-token record, if any)
/// is acknowledged: counts the outcome, marks the piece finished, returns the room.
final class OutcomePublication: OutcomeRecordPublication, @unchecked Sendable {
    /// What finishing the notification needs, taken out of its ``Pipeline/Delivery``: the delivery itself (its
    /// notification, payload, strings) is let go on the answer's thread, where it was just read for the record,
    /// rather than kept until the broker acknowledges and freed cold on the sink's thread.
    private let finished: FinishedDelivery
    /// Records not yet acknowledged: 1, or 2 with an invalid-token record (an ``InvalidTokenPublication``).
    private let remaining: Atomic<Int>

    fileprivate init(pipeline: Pipeline, finished: FinishedDelivery, records: Int) {
        self.finished = finished
        self.remaining = Atomic(records)
        super.init(pipeline: pipeline)
    }

    fileprivate override func recordDone() {
        guard self.remaining.subtract(1, ordering: .acquiringAndReleasing).newValue == 0 else { return }
        self.pipeline.outcomeAcknowledged(self.finished)
    }
}

/// What an acknowledged outcome counts and returns: its metrics' labels, its piece, its room.
struct FinishedDelivery: Sendable {
    let route: String
    let status: OutcomeStatus
    let reason: String?
    let invalidTokenReason: String?
    let ticket: Pipeline.Ticket
    let bytes: Int
    /// 1 when the delivery holds a place in `kafka.max_in_flight`'s count (``Pipeline/Delivery/holdsPlace``).
    let places: Int
    let lane: Lane?
}

/// The invalid-token record that goes with an outcome: acknowledged, it counts towards the outcome's.
final class InvalidTokenPublication: OutcomeRecordPublication, @unchecked Sendable {
    private let outcome: OutcomePublication

    fileprivate init(outcome: OutcomePublication) {
        self.outcome = outcome
        super.init(pipeline: outcome.pipeline)
    }

    fileprivate override func recordDone() {
        self.outcome.recordDone()
    }
}
