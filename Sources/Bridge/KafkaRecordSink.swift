import BridgeCore
import Kafka

/// The pipeline's record sink on the idempotent Kafka producer (`acks=all`): a record is acknowledged by its
/// delivery report.
package struct KafkaRecordSink: RecordSink {
    /// The producer records go through.
    package let producer: KafkaProducer

    /// Creates a sink on `producer`.
    package init(producer: KafkaProducer) {
        self.producer = producer
    }

    package func publish(_ record: OutgoingRecord, acknowledgement: RecordAcknowledgement) async {
        await self.producer.send(
            topic: record.topic,
            key: record.key,
            value: record.value,
            headers: record.headers.map { KafkaHeader(name: $0.0, value: $0.1) },
            handler: Report(acknowledgement)
        )
    }

    package func publishNow(_ record: OutgoingRecord, acknowledgement: RecordAcknowledgement) -> Bool {
        self.producer.sendNow(
            topic: record.topic,
            key: record.key,
            value: record.value,
            headers: record.headers.map { KafkaHeader(name: $0.0, value: $0.1) },
            handler: Report(acknowledgement)
        )
    }

    /// What a failed delivery tells the pipeline: the error (a too-large record as ``RecordTooLargeError``, which
    /// the pipeline may cut down and publish again).
    private static func error(of error: KafkaError) -> any Error {
        error.code == .messageSizeTooLarge ? RecordTooLargeError(detail: "\(error)") : error
    }

    /// A delivery report handed straight to the record's acknowledgement: one object per record between them. A
    /// failure hands back the record as librdkafka still had it, so the pipeline keeps no copy while it waits.
    private final class Report: KafkaDeliveryHandler, @unchecked Sendable {
        let acknowledgement: RecordAcknowledgement

        init(_ acknowledgement: RecordAcknowledgement) {
            self.acknowledgement = acknowledgement
        }

        override func delivered(_ delivery: KafkaDelivery) {
            self.acknowledgement.acknowledged()
        }

        override func failed(_ error: KafkaError, message: KafkaUndeliveredMessage) {
            self.acknowledgement.failed(
                KafkaRecordSink.error(of: error),
                record: OutgoingRecord(
                    topic: message.topic, key: message.key, value: message.value,
                    headers: message.headers.map { ($0.name, $0.value) }))
        }
    }

    package func flush(timeout: Duration) async throws {
        try await self.producer.flush(timeout: timeout)
    }
}
