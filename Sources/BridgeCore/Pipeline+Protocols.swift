import APNSCore
import Routing

/// One partition of an input topic.
package struct PartitionID: Sendable, Hashable, CustomStringConvertible {
    /// The topic.
    package var topic: String
    /// The partition number.
    package var partition: Int32

    /// Creates a partition identifier.
    package init(topic: String, partition: Int32) {
        self.topic = topic
        self.partition = partition
    }

    package var description: String { "\(self.topic)[\(self.partition)]" }
}

extension SourceEvent {
    /// The partition it came from.
    package var partition: PartitionID {
        PartitionID(topic: self.source.topic, partition: self.source.partition)
    }
}

/// Hears partition assignment changes from an ``EventSource``.
package protocol RebalanceListener: Sendable {
    /// `partitions` were assigned to this instance; their events follow, carrying `generation` as their
    /// ``SourceEvent/assignmentGeneration``. Generations increase with every assignment: an event of an older
    /// generation was fetched before its partition was revoked, and the source delivers it again.
    func partitionsAssigned(_ partitions: [PartitionID], generation: UInt64) async
    /// `partitions` are being taken away. The source completes the revocation (commits and releases them)
    /// only after this returns, so the listener finishes or abandons their in-flight work first.
    func partitionsRevoked(_ partitions: [PartitionID]) async
}

/// Where events come from (Kafka, in production). Another broker plugs in by conforming to this.
package protocol EventSource: Sendable {
    /// Starts consuming. Batches of events arrive in order within each partition; the sequence ends when
    /// the source is closed. Rebalances are reported to `listener`.
    func start(listener: any RebalanceListener) async throws -> AsyncThrowingStream<[SourceEvent], any Error>
    /// Everything of `partition` before `nextOffset` is finished and may be committed. Calls for one partition
    /// come in increasing order, one at a time; the call must be quick and must not block.
    func markFinished(_ partition: PartitionID, nextOffset: Int64)
    /// Stops fetching `partitions` until ``resume(_:)``.
    func pause(_ partitions: [PartitionID])
    /// Fetches `partitions` again.
    func resume(_ partitions: [PartitionID])
    /// Commits what was marked finished so far (every `kafka.commit_interval`). A failed commit is logged, not
    /// thrown: the next one carries the same offsets.
    func commit() async
    /// The messages not yet committed in each assigned partition (`pushbridge_consumer_lag`); empty when the
    /// source cannot tell now.
    func lag() async -> [PartitionLag]
    /// Commits what was marked finished, leaves the group and releases resources. Never hangs.
    func close() async
}

/// One partition's messages not yet committed: its high watermark minus its committed offset.
package struct PartitionLag: Sendable, Hashable {
    /// The partition.
    package var partition: PartitionID
    /// Messages at or after the committed offset (or the first retained one, while nothing is committed).
    package var uncommittedMessageCount: Int64

    /// Creates a lag reading.
    package init(partition: PartitionID, uncommittedMessageCount: Int64) {
        self.partition = partition
        self.uncommittedMessageCount = uncommittedMessageCount
    }
}

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

/// Sends notifications (APNs over HTTP/2, in production; or the `log` sender). Another sender plugs in by
/// conforming to this.
package protocol NotificationSender: Sendable {
    /// Sends `notification` with the credentials of `app` (`nil`: the default `apns` block) and returns
    /// APNs' answer. It never throws: every fault is an `APNSResult` (`.failed` when APNs gave no answer).
    func send(_ notification: Notification, app: String?) async -> APNSResult
    /// Sends `notification` and calls `completion` once with what ``send(_:app:)`` would return, from any thread,
    /// without a task per notification where the sender can.
    func send(_ notification: Notification, app: String?, completion: @escaping @Sendable (APNSResult) -> Void)
    /// ``send(_:app:completion:)`` for several notifications at once, so a sender can hand them over together.
    func send(contentsOf batch: [SendRequest])
}

/// One notification for ``NotificationSender/send(contentsOf:)``.
package struct SendRequest: Sendable {
    package var notification: Notification
    package var app: String?
    package var completion: @Sendable (APNSResult) -> Void

    package init(notification: Notification, app: String?, completion: @escaping @Sendable (APNSResult) -> Void) {
        self.notification = notification
        self.app = app
        self.completion = completion
    }
}

extension NotificationSender {
    /// Runs ``send(_:app:)`` in a task.
    package func send(_ notification: Notification, app: String?, completion: @escaping @Sendable (APNSResult) -> Void)
    {
        Task { completion(await self.send(notification, app: app)) }
    }

    /// Sends them one by one.
    package func send(contentsOf batch: [SendRequest]) {
        for request in batch {
            self.send(request.notification, app: request.app, completion: request.completion)
        }
    }
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

/// Maps events to notifications (routes and templates, in production).
package protocol EventMapper: Sendable {
    /// What each matching route makes of `event`. An empty array means no route matched.
    func map(_ event: SourceEvent) -> [RouteMapping]
}

/// What `/readyz` reports.
package struct Readiness: Sendable, Hashable {
    /// Whether the instance can serve its partitions and APNs accepts it.
    package var isReady: Bool
    /// Why not, when not ready (for example `halted: InvalidProviderToken (app default)`).
    package var reason: String?

    /// Ready.
    package static let ready = Readiness(isReady: true, reason: nil)

    /// Not ready, for `reason`.
    package static func notReady(_ reason: String) -> Readiness {
        Readiness(isReady: false, reason: reason)
    }
}
