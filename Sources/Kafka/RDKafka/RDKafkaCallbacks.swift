import CRdKafka
import Logging
import Synchronization

/// What librdkafka's C callbacks of one client reach through the client's opaque pointer. The
/// ``RDKafkaClient`` keeps it alive until the handle is destroyed, so the callbacks never see a freed object.
/// Callbacks run on librdkafka's threads or on the client's poll thread; they only hand data on.
final class RDKafkaCallbacks: Sendable {
    typealias Rebalance =
        @Sendable (
            OpaquePointer, rd_kafka_resp_err_t, UnsafeMutablePointer<rd_kafka_topic_partition_list_t>?
        ) -> Void
    typealias Delivery = @Sendable (UnsafePointer<rd_kafka_message_t>) -> Void

    typealias Fatal = @Sendable (KafkaError) -> Void
    /// The result of a commit (background or synchronous), served by the consumer's poll thread.
    typealias OffsetCommit = @Sendable (rd_kafka_resp_err_t) -> Void

    let logger: Logger
    let rebalance: Rebalance?
    let delivery: Delivery?
    let fatal: Fatal?
    let offsetCommit: OffsetCommit?
    /// The first known cause librdkafka's error and log lines showed (``KafkaKnownCause``).
    let knownCause = Mutex<KafkaKnownCause?>(nil)

    init(
        logger: Logger, rebalance: Rebalance? = nil, delivery: Delivery? = nil, fatal: Fatal? = nil,
        offsetCommit: OffsetCommit? = nil
    ) {
        self.logger = logger
        self.rebalance = rebalance
        self.delivery = delivery
        self.fatal = fatal
        self.offsetCommit = offsetCommit
    }

    /// Installs the callbacks on `conf`, with `self` as the opaque pointer (unretained: the client retains it).
    func install(on conf: OpaquePointer) {
        rd_kafka_conf_set_opaque(conf, Unmanaged.passUnretained(self).toOpaque())
        rd_kafka_conf_set_error_cb(conf, errorCallback)
        rd_kafka_conf_set_log_cb(conf, logCallback)
        if self.rebalance != nil {
            rd_kafka_conf_set_rebalance_cb(conf, rebalanceCallback)
        }
        if self.delivery != nil {
            rd_kafka_conf_set_dr_msg_cb(conf, deliveryReportCallback)
        }
        if self.offsetCommit != nil {
            rd_kafka_conf_set_offset_commit_cb(conf, offsetCommitCallback)
        }
    }

    fileprivate static func from(_ opaque: UnsafeMutableRawPointer) -> RDKafkaCallbacks {
        Unmanaged<RDKafkaCallbacks>.fromOpaque(opaque).takeUnretainedValue()
    }

    /// Keeps the known cause `text` shows, if any; logs it once, as an error with its fix. Returns whether
    /// `text` showed one.
    fileprivate func recognize(_ text: String) -> Bool {
        guard let cause = KafkaKnownCause.recognize(text) else { return false }
        let isNew = self.knownCause.withLock { known in
            defer { known = known ?? cause }
            return known == nil
        }
        if isNew {
            self.logger.error(
                "Kafka broker unusable with this librdkafka",
                metadata: ["kafka.cause": "\(cause.cause)", "kafka.fix": "\(cause.fix)"]
            )
        }
        return true
    }
}

private func rebalanceCallback(
    handle: OpaquePointer?,
    event: rd_kafka_resp_err_t,
    partitions: UnsafeMutablePointer<rd_kafka_topic_partition_list_t>?,
    opaque: UnsafeMutableRawPointer?
) {
    guard let handle, let opaque else {
        return
    }
    RDKafkaCallbacks.from(opaque).rebalance?(handle, event, partitions)
}

private func deliveryReportCallback(
    handle: OpaquePointer?,
    message: UnsafePointer<rd_kafka_message_t>?,
    opaque: UnsafeMutableRawPointer?
) {
    guard let message, let opaque else {
        return
    }
    RDKafkaCallbacks.from(opaque).delivery?(message)
}

private func offsetCommitCallback(
    handle: OpaquePointer?,
    error: rd_kafka_resp_err_t,
    offsets: UnsafeMutablePointer<rd_kafka_topic_partition_list_t>?,
    opaque: UnsafeMutableRawPointer?
) {
    guard let opaque else {
        return
    }
    RDKafkaCallbacks.from(opaque).offsetCommit?(error)
}

/// librdkafka's `error_cb`: mostly transient faults (brokers down, connections refused) it recovers from.
private func errorCallback(
    handle: OpaquePointer?,
    code: Int32,
    reason: UnsafePointer<CChar>?,
    opaque: UnsafeMutableRawPointer?
) {
    guard let opaque else {
        return
    }
    let callbacks = RDKafkaCallbacks.from(opaque)
    if code == RD_KAFKA_RESP_ERR__FATAL.rawValue, let handle {
        // The client is unusable from now on (e.g. the idempotent producer lost its sequence guarantees):
        // read the underlying error and tell the owner, which stops the process.
        var text = [CChar](repeating: 0, count: 512)
        let underlying = rd_kafka_fatal_error(handle, &text, text.count)
        let error = KafkaError(code: KafkaError.Code(underlying), message: String(cText: text), isFatal: true)
        callbacks.logger.critical("Kafka client fatal error", error: error)
        callbacks.fatal?(error)
        return
    }
    let text = reason.map { String(cString: $0) } ?? ""
    if callbacks.recognize(text) {
        return
    }
    callbacks.logger.warning(
        "Kafka client error",
        error: KafkaError(code: KafkaError.Code(rawValue: code), message: text)
    )
}

/// librdkafka's `log_cb` (syslog levels), forwarded to swift-log so it follows the process's log format.
private func logCallback(
    handle: OpaquePointer?,
    level: Int32,
    facility: UnsafePointer<CChar>?,
    text: UnsafePointer<CChar>?
) {
    guard let handle, let opaque = rd_kafka_opaque(handle) else {
        return
    }
    let callbacks = RDKafkaCallbacks.from(opaque)
    let logger = callbacks.logger
    let line = text.map { String(cString: $0) } ?? ""
    if level <= 4 || line.contains("underflow") {
        _ = callbacks.recognize(line)
    }
    // LOG_ERR lines are mostly connection failures librdkafka retries (and reports to error_cb too).
    let swiftLevel: Logger.Level =
        switch level {
        case ...2: .error
        case 3, 4: .warning
        case 5: .notice
        case 6: .info
        default: .debug
        }
    guard logger.logLevel <= swiftLevel else {
        return
    }
    logger.log(
        level: swiftLevel,
        "librdkafka",
        metadata: [
            "kafka.facility": "\(facility.map { String(cString: $0) } ?? "")",
            "kafka.log": "\(line)",
        ]
    )
}
