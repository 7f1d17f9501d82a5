import CRdKafka

/// A librdkafka message's key, value and headers, copied out of it: a consumed message's, or a produced one's that
/// its failed delivery report hands back.
struct RDKafkaMessageContent {
    var key: [UInt8]?
    var value: [UInt8]?
    var headers: [KafkaHeader]

    init(_ message: UnsafePointer<rd_kafka_message_t>) {
        let fields = message.pointee
        self.key = fields.key.map { Array(UnsafeRawBufferPointer(start: $0, count: fields.key_len)) }
        self.value = fields.payload.map { Array(UnsafeRawBufferPointer(start: $0, count: fields.len)) }
        self.headers = []
        var list: OpaquePointer?
        // The list belongs to the message: read, not freed.
        guard rd_kafka_message_headers(message, &list) == RD_KAFKA_RESP_ERR_NO_ERROR, let list else { return }
        var index = 0
        var name: UnsafePointer<CChar>?
        var bytes: UnsafeRawPointer?
        var size = 0
        while rd_kafka_header_get_all(list, index, &name, &bytes, &size) == RD_KAFKA_RESP_ERR_NO_ERROR {
            self.headers.append(
                KafkaHeader(
                    name: name.map { String(cString: $0) } ?? "",
                    value: bytes.map { Array(UnsafeRawBufferPointer(start: $0, count: size)) }))
            index += 1
        }
    }
}
