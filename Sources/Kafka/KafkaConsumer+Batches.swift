import Dispatch
import Synchronization

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
        var reader: CheckedContinuation<[KafkaMessage]?, any Error>?
        var end: End?
        var writerWaiting = false
    }

    private enum ReadAction {
        case deliver([KafkaMessage], wakeWriter: Bool)
        case end(End)
        case cancelled
        case wait
    }

    private let state = Mutex(State())
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

    /// Hands `batch` to a waiting reader or buffers it (the writer checked ``waitForSpace(shouldStop:)``).
    func push(_ batch: [KafkaMessage]) {
        let reader = self.state.withLock { state -> CheckedContinuation<[KafkaMessage]?, any Error>? in
            guard state.end == nil else {
                return nil
            }
            if let reader = state.reader {
                state.reader = nil
                return reader
            }
            state.batches.append(batch)
            return nil
        }
        reader?.resume(returning: batch)
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
        let reader = self.state.withLock { state -> CheckedContinuation<[KafkaMessage]?, any Error>? in
            guard state.end == nil else {
                return nil
            }
            state.end = end
            if case .closed = end {
                state.batches.removeAll()
            }
            let reader = state.reader
            state.reader = nil
            return reader
        }
        switch end {
        case .closed: reader?.resume(returning: nil)
        case .failed(let error): reader?.resume(throwing: error)
        }
    }

    func next() async throws -> [KafkaMessage]? {
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                let action = self.state.withLock { state -> ReadAction in
                    if !state.batches.isEmpty {
                        let wakeWriter = state.writerWaiting
                        state.writerWaiting = false
                        return .deliver(state.batches.removeFirst(), wakeWriter: wakeWriter)
                    }
                    if let end = state.end {
                        // An error is thrown once; afterwards the sequence is simply over.
                        state.end = .closed
                        return .end(end)
                    }
                    if Task.isCancelled {
                        return .cancelled
                    }
                    state.reader = continuation
                    return .wait
                }
                switch action {
                case .deliver(let batch, let wakeWriter):
                    if wakeWriter {
                        self.space.signal()
                    }
                    continuation.resume(returning: batch)
                case .end(.closed): continuation.resume(returning: nil)
                case .end(.failed(let error)): continuation.resume(throwing: error)
                case .cancelled: continuation.resume(throwing: CancellationError())
                case .wait: break
                }
            }
        } onCancel: {
            let reader = self.state.withLock { state in
                let reader = state.reader
                state.reader = nil
                return reader
            }
            reader?.resume(throwing: CancellationError())
        }
    }
}
