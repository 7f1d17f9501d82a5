import CRdKafka
import Dispatch
import Foundation
import Logging
import Synchronization
import Waiting

/// The producer's state shared by its poll thread, its delivery reports and its package API.
final class ProducerContext: Sendable {
    let logger: Logger
    /// Whether ``KafkaProducer/run()`` started the poll thread.
    let phase = Mutex(ClientPhase.idle)
    let stopPolling = Atomic<Bool>(false)
    let destroyWhenStopped = Atomic<Bool>(false)
    let pollThreadStopped = DispatchSemaphore(value: 0)
    /// ``KafkaProducer/queueFullRefusalCount``.
    let queueFullRefusals = Atomic<Int>(0)
    /// Messages handed to librdkafka and not yet reported, and reports not yet passed to a waiting sender.
    private struct Deliveries {
        var inFlight = 0
        var reported = 0
    }

    private let deliveries = AsyncCondition(Deliveries())
    /// Set once ``KafkaProducer/close(timeout:)`` finished.
    let closed = AsyncCondition(false)
    let fatal = Mutex<KafkaError?>(nil)

    init(logger: Logger) {
        self.logger = logger
    }

    var inFlightCount: Int {
        self.deliveries.read { $0.inFlight }
    }

    func willProduce() {
        self.deliveries.withLock { $0.inFlight += 1 }
    }

    /// One message left librdkafka (delivered, failed, or never accepted): the oldest sender waiting for room in
    /// its queue goes on.
    func didDeliver() {
        self.deliveries.withLock { deliveries in
            deliveries.inFlight -= 1
            deliveries.reported += 1
        } settle: { deliveries, waiting in
            // A report nobody waits for is not kept: a later sender tries librdkafka's queue itself first, and waits
            // only when that is full again.
            if waiting == 0 { deliveries.reported = 0 }
        }
    }

    /// A message librdkafka refused (its queue is full, or the message is invalid) never entered it: no longer in
    /// flight, but no report either, so it lets no waiting sender go on. When it did, two senders waiting for room in
    /// a full queue woke each other in turn with their refusals, on every core, for as long as the brokers were
    /// away (issue 28).
    func didNotProduce() {
        self.deliveries.withLock { $0.inFlight -= 1 }
    }

    /// Returns `true` after the next delivery report that no other waiting sender took (at once when nothing is in
    /// flight to report); `false` at once when the task is cancelled, so that no sender retries a full queue in a
    /// loop after cancellation. Senders wait in turn: one report lets one sender try again.
    func waitForDelivery() async -> Bool {
        let result = await self.deliveries.wait(inTurn: true) { deliveries -> Void? in
            if deliveries.reported > 0 {
                deliveries.reported -= 1
                return ()
            }
            return deliveries.inFlight == 0 ? () : nil
        }
        if case .satisfied = result { return true }
        return false
    }

    /// The name of the last topic a report was for: reports come in runs for one topic (the outcomes), and
    /// making a `String` for each one cost an allocation per record. Compared by its bytes, not by librdkafka's
    /// topic handle, whose memory may be reused for another topic.
    private let lastTopic = Mutex<String>("")

    private func topicName(_ handle: OpaquePointer) -> String {
        guard let cName = rd_kafka_topic_name(handle) else { return "" }
        let bytes = UnsafeBufferPointer(
            start: UnsafeRawPointer(cName).assumingMemoryBound(to: UInt8.self), count: strlen(cName))
        return self.lastTopic.withLock { last in
            if !last.utf8.elementsEqual(bytes) { last = String(decoding: bytes, as: UTF8.self) }
            return last
        }
    }

    func delivered(_ message: UnsafePointer<rd_kafka_message_t>) {
        let fields = message.pointee
        if let opaque = fields._private {
            let handler = Unmanaged<KafkaDeliveryHandler>.fromOpaque(opaque).takeRetainedValue()
            let topic = fields.rkt.map { self.topicName($0) } ?? ""
            let partition = KafkaPartition(topic: topic, partition: fields.partition)
            if fields.err == RD_KAFKA_RESP_ERR_NO_ERROR {
                handler.delivered(KafkaDelivery(partition: partition, offset: fields.offset >= 0 ? fields.offset : nil))
            } else {
                handler.failed(
                    KafkaError(fields.err, context: "delivering to \(partition)"),
                    message: Self.undelivered(message, topic: topic))
            }
        }
        self.didDeliver()
    }

    /// The message of a failed delivery report as it was produced: librdkafka hands it back whole (key, value and
    /// headers), so the sender keeps no copy of its own while it waits for the report.
    static func undelivered(_ message: UnsafePointer<rd_kafka_message_t>, topic: String) -> KafkaUndeliveredMessage {
        let content = RDKafkaMessageContent(message)
        return KafkaUndeliveredMessage(topic: topic, key: content.key, value: content.value, headers: content.headers)
    }
}
