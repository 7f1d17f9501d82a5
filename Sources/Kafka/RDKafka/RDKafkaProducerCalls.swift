import CRdKafka

// The producer's librdkafka calls, for ``KafkaProducer``.

extension RDKafkaClient {
    /// Serves the delivery reports and errors that are due, waiting up to `milliseconds` for one. Only the thread that
    /// owns the handle calls it: the producer's poll thread, or its close.
    func serveReports(waitingAtMost milliseconds: Int32) {
        rd_kafka_poll(self.pointer, milliseconds)
    }

    /// Hands one message to librdkafka, which copies `key`, `value` and `headers`. `opaque` comes back with the
    /// message's delivery report, and only then: when this throws (`_QUEUE_FULL`, a refused message, `_DESTROY` once
    /// the client is closing), no report will come.
    func produce(
        topic: String,
        partition: Int32?,
        key: [UInt8]?,
        value: [UInt8]?,
        headers: [KafkaHeader],
        opaque: UnsafeMutableRawPointer
    ) throws {
        try self.withHandle { handle in
            var headerList: OpaquePointer?
            if !headers.isEmpty {
                headerList = rd_kafka_headers_new(headers.count)
                for header in headers {
                    if let bytes = header.value {
                        bytes.withUnsafeBytes { buffer in
                            _ = rd_kafka_header_add(headerList, header.name, -1, buffer.baseAddress, buffer.count)
                        }
                    } else {
                        _ = rd_kafka_header_add(headerList, header.name, -1, nil, 0)
                    }
                }
            }
            let error = withBytes(of: key) { keyPointer, keyCount in
                withBytes(of: value) { valuePointer, valueCount in
                    topic.withCString { topicName in
                        withUnsafeTemporaryAllocation(of: rd_kafka_vu_t.self, capacity: 7) { fields in
                            var count = 0
                            func append(_ type: rd_kafka_vtype_t, _ set: (inout rd_kafka_vu_t) -> Void) {
                                var field = rd_kafka_vu_t()
                                field.vtype = type
                                set(&field)
                                fields[count] = field
                                count += 1
                            }
                            append(RD_KAFKA_VTYPE_TOPIC) { $0.u.cstr = topicName }
                            if let partition {
                                append(RD_KAFKA_VTYPE_PARTITION) { $0.u.i32 = partition }
                            }
                            append(RD_KAFKA_VTYPE_MSGFLAGS) { $0.u.i = RD_KAFKA_MSG_F_COPY }
                            append(RD_KAFKA_VTYPE_OPAQUE) { $0.u.ptr = opaque }
                            if let keyPointer {
                                append(RD_KAFKA_VTYPE_KEY) {
                                    $0.u.mem.ptr = UnsafeMutableRawPointer(mutating: keyPointer)
                                    $0.u.mem.size = keyCount
                                }
                            }
                            if let valuePointer {
                                append(RD_KAFKA_VTYPE_VALUE) {
                                    $0.u.mem.ptr = UnsafeMutableRawPointer(mutating: valuePointer)
                                    $0.u.mem.size = valueCount
                                }
                            }
                            if let headerList {
                                append(RD_KAFKA_VTYPE_HEADERS) { $0.u.headers = headerList }
                            }
                            return rd_kafka_produceva(handle, fields.baseAddress, count)
                        }
                    }
                }
            }
            if let error {
                // On failure the headers stay ours.
                if let headerList {
                    rd_kafka_headers_destroy(headerList)
                }
                throw KafkaError(consuming: error, context: "producing to \(topic)")
            }
        }
    }

    /// Waits up to `timeout` until every message produced so far is delivered or failed; throws `_TIMED_OUT`, naming
    /// how many are outstanding, when some are. Call it inside ``withHandle(_:)``, or from the close that owns the
    /// handle.
    func flush(timeout: Duration) throws(KafkaError) {
        let error = rd_kafka_flush(self.pointer, timeout.milliseconds)
        if error != RD_KAFKA_RESP_ERR_NO_ERROR {
            throw KafkaError(error, context: "flushing \(self.outstandingMessageCount) outstanding messages")
        }
    }

    /// Messages (and requests) librdkafka still holds: queued, in flight, or with a report not yet served.
    var outstandingMessageCount: Int {
        Int(rd_kafka_outq_len(self.pointer))
    }

    /// Fails every message still queued or in flight (`_PURGE_QUEUE`, `_PURGE_INFLIGHT`); their reports come from the
    /// next polls. For the close, once nothing more is produced.
    func purgeOutstanding() {
        _ = rd_kafka_purge(self.pointer, RD_KAFKA_PURGE_F_QUEUE | RD_KAFKA_PURGE_F_INFLIGHT)
    }

    /// Makes librdkafka raise a fatal error as if the broker had caused one (`rd_kafka_test_fatal_error`): for tests.
    func raiseFatalErrorForTesting(reason: String) throws {
        try self.withHandle { handle in
            let error = rd_kafka_test_fatal_error(handle, RD_KAFKA_RESP_ERR_OUT_OF_ORDER_SEQUENCE_NUMBER, reason)
            guard error == RD_KAFKA_RESP_ERR_NO_ERROR else {
                throw KafkaError(error, context: "raising a test fatal error")
            }
        }
    }
}

/// Calls `body` with a pointer to `bytes` and their count; an empty array still gets a non-null pointer
/// (librdkafka tells an empty value from a null one by the pointer).
private func withBytes<Result>(
    of bytes: [UInt8]?,
    _ body: (UnsafeRawPointer?, Int) -> Result
) -> Result {
    guard let bytes else {
        return body(nil, 0)
    }
    if bytes.isEmpty {
        return withUnsafeTemporaryAllocation(byteCount: 1, alignment: 1) { body(UnsafeRawPointer($0.baseAddress), 0) }
    }
    return bytes.withUnsafeBytes { body($0.baseAddress, $0.count) }
}
