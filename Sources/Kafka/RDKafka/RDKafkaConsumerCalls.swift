import CRdKafka

// The consumer's librdkafka calls, for ``KafkaConsumer``. Each takes the handle through ``withHandle(_:)``, so it
// throws `_DESTROY` once the consumer is closing. The blocking ones (those with a timeout) belong on the consumer's
// ``BlockingCalls``.

extension RDKafkaClient {
    /// Routes everything (rebalances, errors, messages) to the consumer queue, which the poll thread serves.
    func pollFromConsumerQueue() {
        rd_kafka_poll_set_consumer(self.pointer)
    }

    /// Subscribes to `topics` in the configured group. Called once, before the client is shared.
    func subscribe(_ topics: [String]) throws(KafkaError) {
        let subscription = RDKafkaPartitionList(capacity: topics.count)
        for topic in topics {
            subscription.add(KafkaPartition(topic: topic, partition: RD_KAFKA_PARTITION_UA), offset: nil)
        }
        let error = rd_kafka_subscribe(self.pointer, subscription.pointer)
        guard error == RD_KAFKA_RESP_ERR_NO_ERROR else {
            throw KafkaError(error, context: "subscribing to \(topics.joined(separator: ", "))")
        }
    }

    /// Assigns `partitions`, each from its first offset, without joining the group. Called once, before the client is
    /// shared.
    func assignFromStart(_ partitions: [KafkaPartition]) throws(KafkaError) {
        let assignment = RDKafkaPartitionList(capacity: partitions.count)
        for partition in partitions {
            assignment.add(partition, offset: Int64(RD_KAFKA_OFFSET_BEGINNING))
        }
        let error = rd_kafka_assign(self.pointer, assignment.pointer)
        guard error == RD_KAFKA_RESP_ERR_NO_ERROR else {
            throw KafkaError(error, context: "assigning \(partitions.map(\.description).joined(separator: ", "))")
        }
    }

    /// Stores each partition's next offset for the next commit; throws the first partition's error (`_STATE` when it
    /// is no longer assigned), else the call's.
    func storeOffsets(_ nextOffsets: [KafkaPartition: Int64]) throws {
        let list = RDKafkaPartitionList(capacity: nextOffsets.count)
        for (partition, offset) in nextOffsets {
            list.add(partition, offset: offset)
        }
        try self.withHandle { handle in
            let error = rd_kafka_offsets_store(handle, list.pointer)
            if let partitionError = list.firstError(context: "storing the offset of") {
                throw partitionError
            }
            if error != RD_KAFKA_RESP_ERR_NO_ERROR {
                throw KafkaError(error, context: "storing offsets")
            }
        }
    }

    /// Sets or clears the application's pause flag of `partitions`, then seeks `seeks` without waiting (under the same
    /// hold of the handle); throws the call's error, else the first partition's.
    func setPaused(
        _ paused: Bool, _ partitions: [KafkaPartition], thenSeek seeks: [(KafkaPartition, Int64)] = []
    ) throws {
        let list = RDKafkaPartitionList(partitions)
        try self.withHandle { handle in
            let error =
                paused
                ? rd_kafka_pause_partitions(handle, list.pointer) : rd_kafka_resume_partitions(handle, list.pointer)
            if error != RD_KAFKA_RESP_ERR_NO_ERROR {
                throw KafkaError(error, context: paused ? "pausing partitions" : "resuming partitions")
            }
            if let partitionError = list.firstError(context: paused ? "pausing" : "resuming") {
                throw partitionError
            }
            seekWithoutWaiting(handle, to: seeks)
        }
    }

    /// Moves where each partition fetches next (``seekWithoutWaiting(_:to:)``).
    func seek(to positions: [(KafkaPartition, Int64)]) throws {
        try self.withHandle { handle in seekWithoutWaiting(handle, to: positions) }
    }

    /// The partitions assigned to this member now.
    func assignment() throws -> [KafkaPartition] {
        try self.withHandle { handle in
            var assigned: UnsafeMutablePointer<rd_kafka_topic_partition_list_t>?
            let error = rd_kafka_assignment(handle, &assigned)
            // The list librdkafka returns is ours to free, also when there is an error.
            let list = assigned.map(RDKafkaPartitionList.init(adopting:))
            guard error == RD_KAFKA_RESP_ERR_NO_ERROR else {
                throw KafkaError(error, context: "reading the assignment")
            }
            return list?.elements.map(\.partition) ?? []
        }
    }

    /// Each partition's position and cached watermarks (no network round trip).
    func lag(for partitions: [KafkaPartition]) throws -> [KafkaPartitionLag] {
        let positions = RDKafkaPartitionList(partitions)
        return try self.withHandle { handle in
            let error = rd_kafka_position(handle, positions.pointer)
            guard error == RD_KAFKA_RESP_ERR_NO_ERROR else {
                throw KafkaError(error, context: "reading positions")
            }
            return positions.elements.map { element in
                let cached = Self.cachedWatermarks(handle, element.partition)
                return KafkaPartitionLag(
                    partition: element.partition,
                    lowWatermark: max(0, cached?.low ?? -1),
                    highWatermark: max(0, cached?.high ?? -1),
                    position: element.offset >= 0 ? element.offset : nil
                )
            }
        }
    }

    /// The partition's watermarks as its leader answers ListOffsets (blocks up to `timeout`), and as this client's
    /// last fetch response said them (`cachedHigh`, when it fetched the partition).
    func queryWatermarks(
        for partition: KafkaPartition, timeout: Duration
    ) throws -> (low: Int64, high: Int64, cachedHigh: Int64?) {
        try self.withHandle { handle in
            var low: Int64 = -1
            var high: Int64 = -1
            let error = rd_kafka_query_watermark_offsets(
                handle, partition.topic, partition.partition, &low, &high, timeout.milliseconds)
            guard error == RD_KAFKA_RESP_ERR_NO_ERROR else {
                throw KafkaError(error, context: "querying the watermarks of \(partition)")
            }
            return (low, high, Self.cachedWatermarks(handle, partition)?.high)
        }
    }

    /// The watermarks librdkafka last heard for `partition`, if it heard any; -1 where it does not know one.
    private static func cachedWatermarks(
        _ handle: OpaquePointer, _ partition: KafkaPartition
    ) -> (low: Int64, high: Int64)? {
        var low: Int64 = -1
        var high: Int64 = -1
        let error = rd_kafka_get_watermark_offsets(handle, partition.topic, partition.partition, &low, &high)
        return error == RD_KAFKA_RESP_ERR_NO_ERROR ? (low, high) : nil
    }

    /// Each partition's latest offset by ListOffsets (blocks up to `timeout`); partitions not answered are left out.
    func latestOffsets(for partitions: [KafkaPartition], timeout: Duration) throws -> [KafkaPartition: Int64] {
        let list = RDKafkaPartitionList(capacity: partitions.count)
        for partition in partitions {
            // ListOffsets by timestamp: "latest" is the timestamp -1, which is RD_KAFKA_OFFSET_END.
            list.add(partition, offset: Int64(RD_KAFKA_OFFSET_END))
        }
        return try self.withHandle { handle in
            let error = rd_kafka_offsets_for_times(handle, list.pointer, timeout.milliseconds)
            guard error == RD_KAFKA_RESP_ERR_NO_ERROR else {
                throw KafkaError(error, context: "querying the latest offsets")
            }
            var result: [KafkaPartition: Int64] = [:]
            for element in list.elements where element.error == RD_KAFKA_RESP_ERR_NO_ERROR && element.offset >= 0 {
                result[element.partition] = element.offset
            }
            return result
        }
    }

    /// The group's committed offsets of `partitions` (blocks up to `timeout`); those without one are left out.
    func committedOffsets(for partitions: [KafkaPartition], timeout: Duration) throws -> [KafkaPartition: Int64] {
        let list = RDKafkaPartitionList(partitions)
        return try self.withHandle { handle in
            let error = rd_kafka_committed(handle, list.pointer, timeout.milliseconds)
            guard error == RD_KAFKA_RESP_ERR_NO_ERROR else {
                throw KafkaError(error, context: "reading committed offsets")
            }
            var result: [KafkaPartition: Int64] = [:]
            for element in list.elements where element.offset >= 0 {
                result[element.partition] = element.offset
            }
            return result
        }
    }

    /// Commits the stored offsets and waits for the coordinator's answer (up to `socket.timeout.ms` without one).
    /// Nothing to commit is not an error.
    func commitStoredOffsets() throws {
        try self.withHandle { handle in
            let error = rd_kafka_commit(handle, nil, 0)
            guard error == RD_KAFKA_RESP_ERR_NO_ERROR || error == RD_KAFKA_RESP_ERR__NO_OFFSET else {
                throw KafkaError(error, context: "committing offsets")
            }
        }
    }
}
