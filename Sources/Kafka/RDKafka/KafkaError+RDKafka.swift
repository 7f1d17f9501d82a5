import CRdKafka

// librdkafka's error calls: names and descriptions of codes, and its error objects.

extension KafkaError.Code {
    init(_ error: rd_kafka_resp_err_t) {
        self.init(rawValue: error.rawValue)
    }

    var resp: rd_kafka_resp_err_t { rd_kafka_resp_err_t(rawValue: self.rawValue) }

    /// librdkafka's name for the code, e.g. `_MSG_TIMED_OUT` or `NOT_ENOUGH_REPLICAS`.
    package var name: String { String(cString: rd_kafka_err2name(self.resp)) }
}

extension KafkaError {
    /// An error from a plain `rd_kafka_resp_err_t`, with librdkafka's description as the message.
    init(_ error: rd_kafka_resp_err_t, context: String? = nil) {
        let text = String(cString: rd_kafka_err2str(error))
        self.init(code: Code(error), message: context.map { "\($0): \(text)" } ?? text)
    }

    /// An error from an `rd_kafka_error_t` object; destroys the object.
    init(consuming error: OpaquePointer, context: String? = nil) {
        let text = String(cString: rd_kafka_error_string(error))
        self.init(
            code: Code(rd_kafka_error_code(error)),
            message: context.map { "\($0): \(text)" } ?? text,
            isFatal: rd_kafka_error_is_fatal(error) != 0
        )
        rd_kafka_error_destroy(error)
    }
}
