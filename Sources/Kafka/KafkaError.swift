import CRdKafka

/// A failure reported by librdkafka or by this layer. The code is always a librdkafka error code
/// (`rd_kafka_resp_err_t`), so broker errors, client errors and the layer's own errors read the same way.
public struct KafkaError: Error, Sendable, Hashable, CustomStringConvertible {
    /// librdkafka's error code; ``Code/name`` is its `rd_kafka_err2name` spelling.
    package var code: Code
    /// What happened, in librdkafka's words where it gave any. Never contains a password or key.
    package var message: String
    /// The configuration property the error is about, when it is about one.
    package var property: String?
    /// Whether librdkafka marks the error fatal: the client cannot be used any more.
    package var isFatal: Bool
    /// What librdkafka's own words showed to be the cause, when it is one PushBridge knows (with its fix).
    package var knownCause: KafkaKnownCause?

    /// Creates an error.
    package init(code: Code, message: String, property: String? = nil, isFatal: Bool = false) {
        self.code = code
        self.message = message
        self.property = property
        self.isFatal = isFatal
    }

    /// `CODE_NAME: message`.
    public var description: String {
        "\(self.code.name): \(self.message)" + (self.knownCause.map { "; \($0)" } ?? "")
    }

    /// A librdkafka error code (`rd_kafka_resp_err_t`). Negative values are client-side errors, positive
    /// values are Kafka protocol errors returned by a broker.
    package struct Code: Sendable, Hashable, CustomStringConvertible {
        /// The numeric `rd_kafka_resp_err_t` value.
        package var rawValue: Int32

        /// Wraps a numeric `rd_kafka_resp_err_t` value.
        package init(rawValue: Int32) {
            self.rawValue = rawValue
        }

        /// The name.
        package var description: String { self.name }

        /// An argument was rejected (`_INVALID_ARG`); also used for rejected configuration properties.
        package static let invalidArgument = Code(RD_KAFKA_RESP_ERR__INVALID_ARG)
        /// The client is closed or closing (`_DESTROY`).
        package static let destroyed = Code(RD_KAFKA_RESP_ERR__DESTROY)
        /// A message could not be delivered within `message.timeout.ms` (`_MSG_TIMED_OUT`).
        package static let messageTimedOut = Code(RD_KAFKA_RESP_ERR__MSG_TIMED_OUT)
        /// The local producer queue is full (`_QUEUE_FULL`).
        package static let queueFull = Code(RD_KAFKA_RESP_ERR__QUEUE_FULL)
        /// The message names a partition the topic does not have (`_UNKNOWN_PARTITION`).
        package static let unknownPartition = Code(RD_KAFKA_RESP_ERR__UNKNOWN_PARTITION)
        /// A message was purged from the local queue before it was sent (`_PURGE_QUEUE`).
        package static let purgedQueued = Code(RD_KAFKA_RESP_ERR__PURGE_QUEUE)
        /// A message was purged while in flight (`_PURGE_INFLIGHT`).
        package static let purgedInFlight = Code(RD_KAFKA_RESP_ERR__PURGE_INFLIGHT)
        /// A wait was given up because its task was cancelled (`_INTR`).
        package static let interrupted = Code(RD_KAFKA_RESP_ERR__INTR)
        /// A blocking operation ran out of time (`_TIMED_OUT`).
        package static let timedOut = Code(RD_KAFKA_RESP_ERR__TIMED_OUT)
        /// The broker connection failed (`_TRANSPORT`).
        package static let transport = Code(RD_KAFKA_RESP_ERR__TRANSPORT)
        /// A fatal error was raised; see ``KafkaError/isFatal`` (`_FATAL`).
        package static let fatal = Code(RD_KAFKA_RESP_ERR__FATAL)
        /// The partition is not assigned to this consumer (`_STATE`).
        package static let state = Code(RD_KAFKA_RESP_ERR__STATE)
        /// The topic or partition does not exist (`UNKNOWN_TOPIC_OR_PART`).
        package static let unknownTopicOrPartition = Code(RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART)
        /// Fewer in-sync replicas than `min.insync.replicas` (`NOT_ENOUGH_REPLICAS`): retryable.
        package static let notEnoughReplicas = Code(RD_KAFKA_RESP_ERR_NOT_ENOUGH_REPLICAS)
        /// The broker is not the partition's leader (`NOT_LEADER_FOR_PARTITION`): retryable.
        package static let notLeaderForPartition = Code(RD_KAFKA_RESP_ERR_NOT_LEADER_FOR_PARTITION)
        /// The message is larger than the broker accepts (`MSG_SIZE_TOO_LARGE`): permanent.
        package static let messageSizeTooLarge = Code(RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE)
        /// The topic may not be written by this client (`TOPIC_AUTHORIZATION_FAILED`): permanent.
        package static let topicAuthorizationFailed = Code(RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED)
        /// `ILLEGAL_GENERATION`: a group request carried a generation the coordinator has moved past.
        package static let illegalGeneration = Code(RD_KAFKA_RESP_ERR_ILLEGAL_GENERATION)
    }
}

extension KafkaError {
    /// A send cancelled while it waited for room in the producer's local queue: nothing was produced.
    static let interruptedWaitingForRoom = KafkaError(
        code: .interrupted, message: "cancelled while waiting for room in the producer's queue; not produced")
}
