import APNSCore
import Routing

/// A record the pipeline publishes: an outcome, an invalid token or a dead letter.
package struct OutgoingRecord: Sendable {
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
package protocol RecordSink: Sendable {
    /// Hands `record` over and returns without waiting for the broker. `acknowledged` is called exactly
    /// once, later (from any thread) or before this returns: with `nil` once the broker acknowledged the
    /// record durably, or with why it could not (``RecordTooLargeError`` when its size is the reason). Nothing is kept per record on the caller's side meanwhile,
    /// which is what lets `max_in_flight` records wait for Kafka without a task each.
    func publish(_ record: OutgoingRecord, acknowledged: @escaping @Sendable ((any Error)?) -> Void) async
    /// ``publish(_:acknowledged:)`` for a caller that must not wait (the pipeline finishing a notification on the
    /// thread its answer came in on): returns `false`, without publishing and without calling `acknowledged`,
    /// when the record could only be taken after a wait; the caller then uses ``publish(_:acknowledged:)``.
    func publishNow(_ record: OutgoingRecord, acknowledged: @escaping @Sendable ((any Error)?) -> Void) -> Bool
    /// ``publishNow(_:acknowledged:)`` with the answer going to an object the caller keeps per record anyway
    /// (the pipeline's outcomes), so that a sink that needs an object per record for its broker can use it
    /// instead of wrapping a closure.
    func publishNow(_ record: OutgoingRecord, acknowledgement: RecordAcknowledgement) -> Bool
    /// Waits until everything published so far is acknowledged, at most `timeout`.
    func flush(timeout: Duration) async throws
}

extension RecordSink {
    /// Takes nothing without a wait: every record goes through ``publish(_:acknowledged:)``.
    package func publishNow(_ record: OutgoingRecord, acknowledged: @escaping @Sendable ((any Error)?) -> Void) -> Bool
    {
        false
    }

    /// ``publishNow(_:acknowledged:)`` with `acknowledgement`'s method as the closure.
    package func publishNow(_ record: OutgoingRecord, acknowledgement: RecordAcknowledgement) -> Bool {
        self.publishNow(record, acknowledged: { acknowledgement.acknowledged($0) })
    }
}

/// What a record's answer from the sink goes to, for ``RecordSink/publishNow(_:acknowledgement:)``: subclass it
/// and override ``acknowledged(_:)``.
open class RecordAcknowledgement: @unchecked Sendable {
    /// An acknowledgement.
    public init() {}

    /// Called exactly once, from any thread: with `nil` once the broker acknowledged the record durably, or with
    /// why it could not (``RecordTooLargeError`` when its size is the reason).
    open func acknowledged(_ error: (any Error)?) {}
}
