import APNSCore
import Routing

/// A record the pipeline publishes: an outcome, an invalid token or a dead letter.
public struct OutgoingRecord: Sendable {
    /// The destination topic.
    package var topic: String
    /// The key.
    package var key: [UInt8]?
    /// The value.
    package var value: [UInt8]?
    /// The headers, in order; a `nil` value is a null header.
    package var headers: [(String, [UInt8]?)]

    /// Creates a record.
    package init(topic: String, key: [UInt8]?, value: [UInt8]?, headers: [(String, [UInt8]?)] = []) {
        self.topic = topic
        self.key = key
        self.value = value
        self.headers = headers
    }
}

/// A sink's answer that a record is larger than the broker or the client accepts: publishing it again
/// unchanged can never succeed.
package struct RecordTooLargeError: Error, CustomStringConvertible {
    /// What the sink said.
    package var detail: String

    /// Creates the error.
    package init(detail: String) {
        self.detail = detail
    }

    package var description: String { "record too large: \(self.detail)" }
}

/// Where records go (the Kafka producer, in production).
///
/// One mechanism for the answer: a ``RecordAcknowledgement`` per record, told once. The pipeline's outcomes are such
/// objects themselves (one object per record between the pipeline and the broker); a caller with a closure uses the
/// form below, written once on top.
package protocol RecordSink: Sendable {
    /// Hands `record` over, first waiting while the sink has no room for it, and returns without waiting for the
    /// broker. `acknowledgement` is told exactly once, later (from any thread) or before this returns: with `nil`
    /// once the broker acknowledged the record durably, or with why it could not (``RecordTooLargeError`` when its
    /// size is the reason). Nothing is kept per record on the caller's side meanwhile, which is what lets
    /// `max_in_flight` records wait for Kafka without a task each.
    func publish(_ record: OutgoingRecord, acknowledgement: RecordAcknowledgement) async
    /// ``publish(_:acknowledgement:)`` for a caller that must not wait (the pipeline finishing a notification on the
    /// thread its answer came in on): returns `false`, without publishing and without telling `acknowledgement`,
    /// when the record could only be taken after a wait; the caller then uses ``publish(_:acknowledgement:)``.
    func publishNow(_ record: OutgoingRecord, acknowledgement: RecordAcknowledgement) -> Bool
    /// Waits until everything published so far is acknowledged, at most `timeout`.
    func flush(timeout: Duration) async throws
}

extension RecordSink {
    /// ``publish(_:acknowledgement:)`` with a closure as the acknowledgement.
    package func publish(_ record: OutgoingRecord, acknowledged: @escaping @Sendable ((any Error)?) -> Void) async {
        await self.publish(record, acknowledgement: ClosureAcknowledgement(acknowledged))
    }
}

/// What a record's answer from the sink goes to: subclass it and override ``acknowledged()`` and
/// ``failed(_:record:)``.
open class RecordAcknowledgement: @unchecked Sendable {
    /// An acknowledgement.
    public init() {}

    /// The broker acknowledged the record durably. Called at most once, and only if ``failed(_:record:)`` is not,
    /// from any thread.
    open func acknowledged() {}

    /// The record could not be published: why (``RecordTooLargeError`` when its size is the reason), and the
    /// record as the sink had it, so that a publisher that tries again need not keep a copy of its own while it
    /// waits. Called at most once, and only if ``acknowledged()`` is not, from any thread.
    open func failed(_ error: any Error, record: OutgoingRecord) {}
}

/// An acknowledgement that calls a closure: with `nil` once acknowledged, with the error once failed.
package final class ClosureAcknowledgement: RecordAcknowledgement, @unchecked Sendable {
    private let body: @Sendable ((any Error)?) -> Void

    /// Calls `body` with the answer.
    package init(_ body: @escaping @Sendable ((any Error)?) -> Void) {
        self.body = body
        super.init()
    }

    override package func acknowledged() {
        self.body(nil)
    }

    override package func failed(_ error: any Error, record: OutgoingRecord) {
        self.body(error)
    }
}
