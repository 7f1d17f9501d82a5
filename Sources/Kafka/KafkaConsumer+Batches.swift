import Dispatch
import Waiting

/// The messages of a ``KafkaConsumer``, in batches, as an async sequence with a bounded buffer: when the
/// reader falls ``KafkaConsumerConfiguration/bufferedBatchCount`` batches behind, the poll thread stops
/// fetching until the reader catches up. Within a partition, messages arrive in offset order.
///
/// The sequence has one reader: iterate it from one task. It ends when the consumer is closed (batches not
/// yet read are dropped; their offsets were never stored, so the group delivers them again) and throws a
/// ``KafkaError`` when librdkafka raised a fatal error.
package struct KafkaMessageBatches: AsyncSequence, Sendable {
    /// A batch: one or more messages, possibly of several partitions.
    package typealias Element = [KafkaMessage]
    /// The sequence throws ``KafkaError`` (fatal errors) and `CancellationError`.
    package typealias Failure = any Error

    let buffer: BatchBuffer

    /// Creates the iterator.
    package func makeAsyncIterator() -> Iterator {
        Iterator(buffer: self.buffer)
    }

    /// Reads the next batch.
    package struct Iterator: AsyncIteratorProtocol {
        let buffer: BatchBuffer

        /// The next batch; `nil` after the consumer closed.
        package mutating func next() async throws -> [KafkaMessage]? {
            try await self.buffer.next()
        }
    }
}

/// The bounded hand-off between the poll thread (the writer) and the reader of ``KafkaMessageBatches``.
final class BatchBuffer: Sendable {
    enum End: Sendable {
        case closed
        case failed(KafkaError)
    }

    private struct State {
        var batches: [[KafkaMessage]] = []
        var end: End?
        var writerWaiting = false
    }

    /// What the reader finds: a batch (and whether the writer waits for the slot it frees), or the end.
    private enum Read: Sendable {
        case batch([KafkaMessage], wakeWriter: Bool)
        case end(End)
    }

    /// The reader waits on it for a batch or the end; the writer is a thread and waits on ``space``.
    private let state = AsyncCondition(State())
    /// Signalled by the reader when it frees a slot the writer waits for. A semaphore keeps a signal that
    /// arrives before the writer starts waiting.
    private let space = DispatchSemaphore(value: 0)
    private let capacity: Int

    init(capacity: Int) {
        self.capacity = max(1, capacity)
    }

    /// Blocks the calling (poll) thread until one more batch fits, or until `shouldStop` returns true
    /// (checked every 100 ms); returns whether there is room. `whileWaiting` runs every 100 ms of the wait.
    func waitForSpace(shouldStop: () -> Bool, whileWaiting: () -> Void = {}) -> Bool {
        while true {
            let hasSpace = self.state.withLock { state in
                if state.batches.count < self.capacity {
                    return true
                }
                state.writerWaiting = true
                return false
            }
            if hasSpace {
                return true
            }
            if shouldStop() {
                return false
            }
            if self.space.wait(timeout: .now() + .milliseconds(100)) == .timedOut {
                whileWaiting()
            }
        }
    }

    /// Buffers `batch`, for a waiting reader or the next read (the writer checked ``waitForSpace(shouldStop:)``).
    func push(_ batch: [KafkaMessage]) {
        self.state.withLock { state in
            guard state.end == nil else { return }
            state.batches.append(batch)
        }
    }

    /// Drops buffered messages of `partitions` (they were revoked: another member will consume them).
    func discard(_ partitions: Set<KafkaPartition>) {
        guard !partitions.isEmpty else {
            return
        }
        self.state.withLock { state in
            state.batches = state.batches.compactMap { batch in
                let kept = batch.filter { !partitions.contains($0.kafkaPartition) }
                return kept.isEmpty ? nil : kept
            }
        }
        self.space.signal()
    }

    /// Ends the sequence: the reader gets `nil` (closed; buffered batches are dropped) or, after the buffered
    /// batches, the error.
    func finish(_ end: End) {
        self.state.withLock { state in
            guard state.end == nil else { return }
            state.end = end
            if case .closed = end {
                state.batches.removeAll()
            }
        }
    }

    func next() async throws -> [KafkaMessage]? {
        let read = await self.state.wait { state -> Read? in
            if !state.batches.isEmpty {
                let wakeWriter = state.writerWaiting
                state.writerWaiting = false
                return .batch(state.batches.removeFirst(), wakeWriter: wakeWriter)
            }
            if let end = state.end {
                // An error is thrown once; afterwards the sequence is simply over.
                state.end = .closed
                return .end(end)
            }
            return nil
        }
        switch read {
        case .satisfied(.batch(let batch, let wakeWriter)):
            if wakeWriter {
                self.space.signal()
            }
            return batch
        case .satisfied(.end(.closed)): return nil
        case .satisfied(.end(.failed(let error))): throw error
        case .cancelled, .timedOut: throw CancellationError()
        }
    }
}
