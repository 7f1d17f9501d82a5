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

    /// What a delivery report tells the pipeline: `nil`, or the error (a too-large record as
    /// ``RecordTooLargeError``, which the pipeline may cut down and publish again).
    private static func error(of result: Result<KafkaDelivery, KafkaError>) -> (any Error)? {
        switch result {
        case .success: nil
        case .failure(let error) where error.code == .messageSizeTooLarge: RecordTooLargeError(detail: "\(error)")
        case .failure(let error): error
        }
    }

    /// A delivery report handed straight to the record's acknowledgement: one object per record between them.
    private final class Report: KafkaDeliveryHandler, @unchecked Sendable {
        let acknowledgement: RecordAcknowledgement

        init(_ acknowledgement: RecordAcknowledgement) {
            self.acknowledgement = acknowledgement
        }

        override func delivered(_ result: Result<KafkaDelivery, KafkaError>) {
            self.acknowledgement.acknowledged(KafkaRecordSink.error(of: result))
        }
    }

    package func flush(timeout: Duration) async throws {
        try await self.producer.flush(timeout: timeout)
    }
}
