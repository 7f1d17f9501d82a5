import CRdKafka
import Foundation
import Synchronization

/// Owns one `rd_kafka_t` (and, for a mock cluster, the `rd_kafka_mock_cluster_t` it hosts).
///
/// This is the one place where raw librdkafka handles cross threads, so it is `@unchecked Sendable`. That is
/// safe because librdkafka handles are thread-safe (every package function may be called from any thread), and
/// the only mutable state here, `state`, is guarded by a readers-writer lock: callers from outside the
/// client's own threads go through ``withHandle(_:)`` (read lock), and ``destroy()`` takes the write lock, so
/// no call can run on a freed handle.
final class RDKafkaClient: @unchecked Sendable {
    /// The `rd_kafka_t *`. Used directly only by the client's own poll thread, which destroys it last.
    let pointer: OpaquePointer
    /// The mock cluster this handle hosts, if any.
    let mockCluster: OpaquePointer?
    /// Kept alive as long as the handle: librdkafka holds it as an unretained opaque pointer.
    private let callbacks: RDKafkaCallbacks?

    private enum State {
        case open
        case closing
        case destroyed
    }

    private var state = State.open
    private let lock: UnsafeMutablePointer<pthread_rwlock_t>

    private init(pointer: OpaquePointer, mockCluster: OpaquePointer? = nil, callbacks: RDKafkaCallbacks? = nil) {
        self.pointer = pointer
        self.mockCluster = mockCluster
        self.callbacks = callbacks
        self.lock = .allocate(capacity: 1)
        pthread_rwlock_init(self.lock, nil)
    }

    deinit {
        pthread_rwlock_destroy(self.lock)
        self.lock.deallocate()
    }

    /// What a client does: produce, or consume in a group.
    enum Kind {
        case producer
        case consumer
    }

    /// Creates a client of `kind` from `properties`, applied in order, with `callbacks` installed.
    static func make(
        _ kind: Kind,
        properties: [(String, String)],
        callbacks: RDKafkaCallbacks?
    ) throws(KafkaError) -> RDKafkaClient {
        guard let conf = rd_kafka_conf_new() else {
            throw KafkaError(code: .invalidArgument, message: "librdkafka could not allocate a configuration")
        }
        var errorText = [CChar](repeating: 0, count: 512)
        for (name, value) in properties {
            let result = rd_kafka_conf_set(conf, name, value, &errorText, errorText.count)
            if result != RD_KAFKA_CONF_OK {
                rd_kafka_conf_destroy(conf)
                // librdkafka quotes the value it rejected; the value may be a secret (`sasl.password`), so it
                // is never repeated.
                var reason = String(cText: errorText)
                if !value.isEmpty { reason = reason.replacingOccurrences(of: value, with: "<the value>") }
                throw KafkaError(
                    code: .invalidArgument,
                    message: "librdkafka rejected property '\(name)': \(reason)",
                    property: name
                )
            }
        }
        callbacks?.install(on: conf)
        // rd_kafka_new takes the configuration over only when it succeeds.
        let type = kind == .producer ? RD_KAFKA_PRODUCER : RD_KAFKA_CONSUMER
        guard let handle = rd_kafka_new(type, conf, &errorText, errorText.count) else {
            rd_kafka_conf_destroy(conf)
            throw KafkaError(
                code: .invalidArgument,
                message: "librdkafka could not create the client: \(String(cText: errorText))"
            )
        }
        return RDKafkaClient(pointer: handle, callbacks: callbacks)
    }

    /// Creates a handle that hosts a mock cluster of `brokerCount` brokers on loopback.
    static func makeMockCluster(
        brokerCount: Int32,
        properties: [(String, String)]
    ) throws(KafkaError) -> RDKafkaClient {
        let host = try Self.make(.producer, properties: properties, callbacks: nil)
        guard let cluster = rd_kafka_mock_cluster_new(host.pointer, brokerCount) else {
            host.destroy()
            throw KafkaError(code: .invalidArgument, message: "librdkafka could not start a mock cluster")
        }
        let client = RDKafkaClient(pointer: host.pointer, mockCluster: cluster)
        host.state = .destroyed  // the new wrapper owns the handle now
        return client
    }

    /// Runs `body` with the handle unless the client is closing or destroyed, in which case it throws
    /// `_DESTROY`. Safe from any thread, never from inside a librdkafka callback of this client's close.
    func withHandle<Result>(_ body: (OpaquePointer) throws -> Result) throws -> Result {
        pthread_rwlock_rdlock(self.lock)
        defer { pthread_rwlock_unlock(self.lock) }
        guard case .open = self.state else {
            throw KafkaError(code: .destroyed, message: "the Kafka client is closed")
        }
        return try body(self.pointer)
    }

    /// Makes ``withHandle(_:)`` refuse new calls, after the ones running have returned.
    func stopAccepting() {
        pthread_rwlock_wrlock(self.lock)
        defer { pthread_rwlock_unlock(self.lock) }
        if case .open = self.state {
            self.state = .closing
        }
    }

    /// Frees the mock cluster and the handle, once, after every running ``withHandle(_:)`` call returned.
    func destroy() {
        pthread_rwlock_wrlock(self.lock)
        defer { pthread_rwlock_unlock(self.lock) }
        if case .destroyed = self.state {
            return
        }
        self.state = .destroyed
        if let mockCluster = self.mockCluster {
            rd_kafka_mock_cluster_destroy(mockCluster)
        }
        rd_kafka_destroy(self.pointer)
    }

    /// librdkafka's fatal error, if one was raised.
    func fatalError() -> KafkaError? {
        var text = [CChar](repeating: 0, count: 512)
        let code = rd_kafka_fatal_error(self.pointer, &text, text.count)
        guard code != RD_KAFKA_RESP_ERR_NO_ERROR else {
            return nil
        }
        return KafkaError(code: KafkaError.Code(code), message: String(cText: text), isFatal: true)
    }
}

/// A `rd_kafka_topic_partition_list_t` owned by Swift: freed exactly once by `deinit`, on every path.
final class RDKafkaPartitionList {
    let pointer: UnsafeMutablePointer<rd_kafka_topic_partition_list_t>

    init(capacity: Int) {
        self.pointer = rd_kafka_topic_partition_list_new(Int32(clamping: max(1, capacity)))
    }

    /// Takes over a list librdkafka returned to the caller.
    init(adopting pointer: UnsafeMutablePointer<rd_kafka_topic_partition_list_t>) {
        self.pointer = pointer
    }

    convenience init(_ partitions: some Collection<KafkaPartition>) {
        self.init(capacity: partitions.count)
        for partition in partitions {
            self.add(partition, offset: nil)
        }
    }

    deinit {
        rd_kafka_topic_partition_list_destroy(self.pointer)
    }

    func add(_ partition: KafkaPartition, offset: Int64?) {
        let element = rd_kafka_topic_partition_list_add(self.pointer, partition.topic, partition.partition)
        if let offset {
            element?.pointee.offset = offset
        }
    }

    /// The elements: partition, offset, per-partition error.
    var elements: [(partition: KafkaPartition, offset: Int64, error: rd_kafka_resp_err_t)] {
        Self.elements(of: self.pointer)
    }

    static func elements(
        of list: UnsafePointer<rd_kafka_topic_partition_list_t>
    ) -> [(partition: KafkaPartition, offset: Int64, error: rd_kafka_resp_err_t)] {
        let count = Int(list.pointee.cnt)
        guard count > 0, let elements = list.pointee.elems else {
            return []
        }
        return (0..<count).map { index in
            let element = elements[index]
            let topic = element.topic.map { String(cString: $0) } ?? ""
            return (KafkaPartition(topic: topic, partition: element.partition), element.offset, element.err)
        }
    }

    /// The first per-partition error, as a ``KafkaError`` naming the partition.
    func firstError(context: String) -> KafkaError? {
        for element in self.elements where element.error != RD_KAFKA_RESP_ERR_NO_ERROR {
            return KafkaError(element.error, context: "\(context) \(element.partition)")
        }
        return nil
    }
}

/// The librdkafka this process runs with.
enum RDKafkaVersion {
    /// Its version as text, e.g. `2.0.2`.
    static var text: String { String(cString: rd_kafka_version_str()) }
    /// Its version as `rd_kafka_version()` numbers it (0xMMmmrrpp).
    static var number: Int32 { rd_kafka_version() }
}

/// Whether a client's `run()` started its poll thread: nothing starts in `init`, and nothing after the close.
enum ClientPhase {
    case idle
    case running
    case closed
}

extension Mutex where Value == ClientPhase {
    /// Moves from idle to running; whether it did (a second `run()`, or one after the close, starts nothing).
    func start() -> Bool {
        self.withLock { phase in
            guard phase == .idle else { return false }
            phase = .running
            return true
        }
    }

    /// Moves to closed; what it was.
    func close() -> ClientPhase {
        self.withLock { phase in
            defer { phase = .closed }
            return phase
        }
    }
}

/// Starts a thread that runs `body`, named `name` as `top`, `perf` and `/proc/<pid>/task/*/comm` show it.
///
/// Linux keeps at most 15 bytes of a thread's name and refuses a longer one outright (Foundation's `Thread.name`
/// then leaves the thread with its creator's name), so names must fit.
func startThread(named name: String, _ body: @escaping @Sendable () -> Void) {
    precondition(name.utf8.count <= 15, "thread name '\(name)' is longer than Linux's 15 bytes")
    let thread = Thread {
        Thread.current.name = name  // on the thread itself: Foundation then names the OS thread
        body()
    }
    thread.start()
}

extension String {
    /// The NUL-terminated text in a C buffer librdkafka wrote (an `errstr`).
    init(cText buffer: [CChar]) {
        self.init(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
