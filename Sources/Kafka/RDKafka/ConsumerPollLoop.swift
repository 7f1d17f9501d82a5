import CRdKafka
import Dispatch
import Foundation
import Logging
import Synchronization
import Waiting

/// The poll thread's work: fetch into batches while there is room, then close and destroy the handle.
struct PollLoop: Sendable {
    let client: RDKafkaClient
    let context: ConsumerContext
    let maxBatchMessageCount: Int
    let maxBatchBytes: Int
    let pollTimeoutMilliseconds: Int32

    func run() {
        let handle = self.client.pointer
        var topicNames = TopicNameCache()
        var failure: KafkaError?
        // What a poll returned while the buffer was full (one message at most): handed over first, once it fits.
        var held = Collected()
        let shouldStop = { self.context.closeRequested.load(ordering: .relaxed) }
        // librdkafka takes the partitions of a member that does not poll for `max.poll.interval.ms`, and the poll
        // thread does not poll while the buffer is full: a reader that stops for long (a pipeline whose line is
        // halted and full) would cost the group a rebalance, and the member its partitions. While every assigned
        // partition is paused a poll returns none of their messages, only rebalances and errors, so the thread
        // polls then, every 100 ms of the wait. A message that comes anyway (a resume in between) is held, and
        // the thread stops polling until there is room.
        let keepMembership = {
            guard held.messages.isEmpty, failure == nil, self.context.everyAssignedPartitionPaused,
                let message = rd_kafka_consumer_poll(handle, 0)
            else {
                return
            }
            failure = self.collect(message, into: &held, topicNames: &topicNames)
        }
        while !shouldStop(), failure == nil,
            self.context.buffer.waitForSpace(shouldStop: shouldStop, whileWaiting: keepMembership)
        {
            if !held.messages.isEmpty || held.redelivered > 0 {
                self.hand(&held)
                continue
            }
            // Wait for the first message, then take what is already there without waiting. After a resume, only
            // look: an empty queue is the moment to wake the fetchers again.
            var next = rd_kafka_consumer_poll(
                handle, self.context.wakesPending ? 0 : self.pollTimeoutMilliseconds)
            guard next != nil else {
                self.context.wakeFetchers(handle)
                continue
            }
            var collected = Collected()
            collected.messages.reserveCapacity(self.maxBatchMessageCount)
            while let message = next {
                // Looked up per message: the polls below may serve a rebalance in the middle of a batch.
                failure = self.collect(message, into: &collected, topicNames: &topicNames)
                if failure != nil || collected.messages.count >= self.maxBatchMessageCount
                    || collected.bytes >= self.maxBatchBytes
                {
                    break
                }
                next = rd_kafka_consumer_poll(handle, 0)
                if next == nil {
                    self.context.wakeFetchers(handle)
                }
            }
            self.hand(&collected)
        }
        // Revokes the assignment through the rebalance callback (listener, synchronous commit), then leaves.
        let closeError = rd_kafka_consumer_close(handle)
        if closeError != RD_KAFKA_RESP_ERR_NO_ERROR {
            self.context.logger.warning(
                "Consumer close reported an error",
                error: KafkaError(closeError))
        }
        self.client.destroy()
        self.context.buffer.finish(failure.map(BatchBuffer.End.failed) ?? .closed)
        self.context.listenerCalls.continuation.finish()
        self.context.closed.set()
    }

    /// Messages taken from librdkafka for one batch.
    private struct Collected {
        var messages: [KafkaMessage] = []
        /// Their keys', values' and headers' bytes.
        var bytes = 0
        /// Messages dropped as already delivered in their assignment (see ``ConsumerContext/admit(_:offset:)``).
        var redelivered = 0
    }

    /// Copies `message` into `collected`, stamped with its assignment generation, unless its assignment delivered
    /// it already; destroys it. Returns the fatal error an error event carries.
    private func collect(
        _ message: UnsafeMutablePointer<rd_kafka_message_t>,
        into collected: inout Collected,
        topicNames: inout TopicNameCache
    ) -> KafkaError? {
        defer { rd_kafka_message_destroy(message) }
        guard message.pointee.err == RD_KAFKA_RESP_ERR_NO_ERROR else {
            return self.report(message)
        }
        let topic = topicNames.name(of: message.pointee.rkt)
        guard
            let generation = self.context.admit(
                KafkaPartition(topic: topic, partition: message.pointee.partition), offset: message.pointee.offset)
        else {
            collected.redelivered += 1
            return nil
        }
        let copy = Self.copy(message, topic: topic, generation: generation)
        collected.bytes += copy.byteCount
        collected.messages.append(consume copy)
        return nil
    }

    /// Pushes what was collected into the buffer (which has room) and starts over.
    private func hand(_ collected: inout Collected) {
        if collected.redelivered > 0 {
            self.context.logger.debug(
                "Messages fetched again after a resume dropped",
                metadata: ["kafka.messages": "\(collected.redelivered)"])
        }
        if !collected.messages.isEmpty {
            self.context.buffer.push(collected.messages)
        }
        collected = Collected()
    }

    /// Logs a consumer error event; returns the fatal error that ends consumption, if it is one.
    private func report(_ message: UnsafeMutablePointer<rd_kafka_message_t>) -> KafkaError? {
        let code = message.pointee.err
        if code == RD_KAFKA_RESP_ERR__PARTITION_EOF {
            return nil
        }
        if code == RD_KAFKA_RESP_ERR__FATAL {
            let error = self.client.fatalError() ?? KafkaError(code)
            self.context.logger.error("Consumer failed", error: error)
            return error
        }
        let text = rd_kafka_message_errstr(message).map { String(cString: $0) } ?? ""
        self.context.logger.warning(
            "Consumer error",
            error: KafkaError(code: KafkaError.Code(code), message: text)
        )
        return nil
    }

    private static func copy(
        _ message: UnsafeMutablePointer<rd_kafka_message_t>, topic: String, generation: UInt64
    ) -> KafkaMessage {
        let content = RDKafkaMessageContent(message)
        var timestampType = RD_KAFKA_TIMESTAMP_NOT_AVAILABLE
        let timestamp = rd_kafka_message_timestamp(message, &timestampType)
        return KafkaMessage(
            topic: topic,
            partition: message.pointee.partition,
            offset: message.pointee.offset,
            key: content.key,
            value: content.value,
            headers: content.headers,
            timestampMilliseconds: timestamp >= 0 ? timestamp : nil,
            assignmentGeneration: generation
        )
    }
}

/// Remembers the Swift name of the last topic handle seen, so a batch from one topic makes one `String`.
private struct TopicNameCache {
    private var cachedName = ""
    private var cachedC: [CChar] = [0]

    mutating func name(of topic: OpaquePointer?) -> String {
        guard let topic, let cName = rd_kafka_topic_name(topic) else {
            return ""
        }
        if strcmp(cName, self.cachedC) != 0 {
            self.cachedName = String(cString: cName)
            self.cachedC = Array(self.cachedName.utf8CString)
        }
        return self.cachedName
    }
}
