import CRdKafka
import Dispatch
import Foundation
import Logging
import Synchronization
import Waiting

/// An idempotent producer (`enable.idempotence=true`, `acks=all`) over librdkafka.
///
/// ``send(topic:key:value:headers:partition:)`` returns once the broker acknowledged the message durably, or throws
/// the delivery error. Many sends may be in flight at once: librdkafka batches them. A dedicated thread
/// serves the delivery reports. Call ``close(timeout:)`` when done.
package final class KafkaProducer: Sendable {
    private let client: RDKafkaClient
    private let context: ProducerContext
    /// Its blocking calls (flushes, the close): on a thread of its own.
    private let calls = BlockingCalls(name: "kafka-prod-call", maximumThreads: 2)

    /// Creates the producer; ``run()`` serves its delivery reports. Throws a ``KafkaError`` naming the property when
    /// librdkafka rejects the configuration.
    ///
    /// - Parameter onFatalError: called once, on a librdkafka thread, when the producer raises a fatal error
    ///   (the idempotent producer can no longer guarantee order and no duplicates): every later send fails,
    ///   so the owner should drain and stop.
    package init(
        configuration: KafkaProducerConfiguration,
        logger: Logger,
        onFatalError: @escaping @Sendable (KafkaError) -> Void = { _ in }
    ) throws(KafkaError) {
        let context = ProducerContext(logger: logger)
        self.client = try RDKafkaClient.make(
            RD_KAFKA_PRODUCER,
            properties: configuration.librdkafkaProperties,
            callbacks: RDKafkaCallbacks(
                logger: logger,
                delivery: { context.delivered($0) },
                fatal: { error in
                    context.fatal.withLock { $0 = $0 ?? error }
                    onFatalError(error)
                }
            )
        )
        self.context = context
    }

    deinit {
        // Released without close(): no send can be pending (each holds the producer). A running poll thread frees
        // the handle once it stops; without one, a thread of its own does, since librdkafka's destroy can block.
        switch self.context.phase.close() {
        case .closed:
            return
        case .running:
            self.context.destroyWhenStopped.store(true, ordering: .relaxed)
            self.context.stopPolling.store(true, ordering: .relaxed)
        case .idle:
            let (client, context) = (self.client, self.context)
            startThread(named: "kafka-prod-free") { KafkaProducer.purgeAndDestroy(client, context: context) }
        }
        self.calls.stop()
    }

    /// Serves the delivery reports and the errors on a thread of its own (`kafka-prod-poll`) until
    /// ``close(timeout:)``, and returns once the producer is closed. Nothing starts before: a send's handler hears
    /// of its message only once this runs (or from the close's flush). Cancelled, it returns at once and the thread
    /// goes on until the close; a second call, or one after the close, starts nothing and waits for the close.
    package func run() async {
        let (client, context) = (self.client, self.context)
        if context.phase.start() {
            startThread(named: "kafka-prod-poll") {
                // Delivery reports and errors are served here, in the callbacks below.
                while !context.stopPolling.load(ordering: .relaxed) {
                    rd_kafka_poll(client.pointer, 100)
                }
                if context.destroyWhenStopped.load(ordering: .relaxed) {
                    KafkaProducer.purgeAndDestroy(client, context: context)
                }
                context.pollThreadStopped.signal()
            }
        }
        _ = await context.closed.waitUntilSet()
    }

    /// Messages sent but not yet delivered or failed.
    package var inFlightMessageCount: Int {
        self.context.inFlightCount
    }

    /// How many times librdkafka refused a message because its local queue was full. A sender waiting for room
    /// tries once per delivery report, so this grows with reports, never while the brokers are away.
    package var queueFullRefusalCount: Int {
        self.context.queueFullRefusals.load(ordering: .relaxed)
    }

    /// The fatal error the producer raised, if it did; it cannot send after one.
    package var fatalError: KafkaError? {
        self.context.fatal.withLock { $0 }
    }

    /// Makes librdkafka raise a fatal error as if the broker had caused one (`rd_kafka_test_fatal_error`),
    /// so tests can check what the owner does then. Never call it in production.
    package func raiseFatalErrorForTesting(reason: String) throws {
        try self.client.withHandle { handle in
            let error = rd_kafka_test_fatal_error(handle, RD_KAFKA_RESP_ERR_OUT_OF_ORDER_SEQUENCE_NUMBER, reason)
            guard error == RD_KAFKA_RESP_ERR_NO_ERROR else {
                throw KafkaError(error, context: "raising a test fatal error")
            }
        }
    }

    /// Produces one message and waits for its delivery report. The partition follows from the key unless
    /// `partition` names one.
    /// Throws a ``KafkaError``: the delivery error (e.g. `_MSG_TIMED_OUT` after librdkafka's own retries),
    /// or `_DESTROY` once the producer is closing. When librdkafka's local queue is full, waits for
    /// deliveries to make room instead of failing; cancelled while it waits, it throws `_INTR` without producing.
    @discardableResult
    package func send(
        topic: String,
        key: [UInt8]?,
        value: [UInt8]?,
        headers: [KafkaHeader] = [],
        partition: Int32? = nil
    ) async throws -> KafkaDelivery {
        let report = AwaitedDelivery()
        await self.send(topic: topic, key: key, value: value, headers: headers, partition: partition, handler: report)
        return try await report.value()
    }

    /// Produces one message and returns once librdkafka has it; `handler` is told exactly once, later (on the
    /// producer's poll thread) or at once when the message is refused, with its delivery report.
    ///
    /// Nothing waits for the broker meanwhile: a caller with many records in flight keeps no task per record.
    /// The failure is a ``KafkaError``: the delivery error (e.g. `_MSG_TIMED_OUT` after librdkafka's own
    /// retries), why the message was refused, or `_DESTROY` once the producer is closing. When librdkafka's
    /// local queue is full, waits for deliveries to make room instead of failing; cancelled while it waits (a
    /// shutdown that gave up on its work, with every broker down), it tells `handler` `_INTR` at once, without
    /// producing, instead of trying again.
    package func send(
        topic: String,
        key: [UInt8]?,
        value: [UInt8]?,
        headers: [KafkaHeader] = [],
        partition: Int32? = nil,
        handler: KafkaDeliveryHandler
    ) async {
        while !self.sendNow(
            topic: topic, key: key, value: value, headers: headers, partition: partition, handler: handler)
        {
            guard await self.context.waitForDelivery() else {
                handler.delivered(.failure(KafkaError.interruptedWaitingForRoom))
                return
            }
        }
    }

    /// ``sendNow(topic:key:value:headers:partition:handler:)`` with a closure for the delivery report.
    package func sendNow(
        topic: String,
        key: [UInt8]?,
        value: [UInt8]?,
        headers: [KafkaHeader] = [],
        partition: Int32? = nil,
        completion: @escaping @Sendable (Result<KafkaDelivery, KafkaError>) -> Void
    ) -> Bool {
        self.sendNow(
            topic: topic, key: key, value: value, headers: headers, partition: partition,
            handler: DeliveryBox(completion))
    }

    /// ``send(topic:key:value:headers:partition:handler:)`` for a caller that must not wait (an event loop):
    /// returns `false` without producing, and without telling `handler`, when librdkafka's local queue is full;
    /// otherwise as that method. The one way a message is produced: every other send goes through it. `handler`
    /// travels through librdkafka as the message's opaque: a caller that keeps an object per message anyway makes
    /// it the handler, instead of a closure and a box around it.
    package func sendNow(
        topic: String,
        key: [UInt8]?,
        value: [UInt8]?,
        headers: [KafkaHeader] = [],
        partition: Int32? = nil,
        handler: KafkaDeliveryHandler
    ) -> Bool {
        // Retained once here, released once: by the delivery report, or below if produce fails.
        let opaque = Unmanaged.passRetained(handler)
        do {
            try self.produce(
                topic: topic, partition: partition, key: key, value: value, headers: headers, opaque: opaque)
            return true
        } catch let error as KafkaError where error.code == .queueFull {
            opaque.release()
            self.context.queueFullRefusals.add(1, ordering: .relaxed)
            return false
        } catch {
            opaque.release()
            handler.delivered(.failure(error as? KafkaError ?? KafkaError(code: .state, message: "\(error)")))
            return true
        }
    }

    private func produce(
        topic: String,
        partition: Int32?,
        key: [UInt8]?,
        value: [UInt8]?,
        headers: [KafkaHeader],
        opaque: Unmanaged<KafkaDeliveryHandler>
    ) throws {
        try self.client.withHandle { handle in
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
            self.context.willProduce()
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
                            append(RD_KAFKA_VTYPE_OPAQUE) { $0.u.ptr = opaque.toOpaque() }
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
                // On failure the headers stay ours, and no delivery report will come.
                if let headerList {
                    rd_kafka_headers_destroy(headerList)
                }
                self.context.didNotProduce()
                throw KafkaError(consuming: error, context: "producing to \(topic)")
            }
        }
    }

    /// Waits until every message sent so far is delivered or failed, at most `timeout`; throws
    /// `_TIMED_OUT` when some are still outstanding.
    package func flush(timeout: Duration) async throws {
        let client = self.client
        try await self.calls.run {
            try client.withHandle { handle in
                let error = rd_kafka_flush(handle, timeout.milliseconds)
                if error != RD_KAFKA_RESP_ERR_NO_ERROR {
                    throw KafkaError(error, context: "flushing \(rd_kafka_outq_len(handle)) outstanding messages")
                }
            }
        }
    }

    /// Stops accepting sends, waits up to `timeout` for outstanding deliveries, fails the rest with
    /// `_PURGE_QUEUE`/`_PURGE_INFLIGHT` (every pending ``send(topic:key:value:headers:partition:)`` returns), and frees
    /// librdkafka's resources. Safe to call more than once.
    package func close(timeout: Duration = .seconds(10)) async {
        let client = self.client
        let context = self.context
        // From here run() starts no thread; one it started is stopped below.
        let previous = context.phase.close()
        guard previous != .closed else {
            _ = await context.closed.waitUntilSet()
            return
        }
        let running = previous == .running
        _ = try? await self.calls.run {
            client.stopAccepting()
            let handle = client.pointer
            let flushError = rd_kafka_flush(handle, timeout.milliseconds)
            if flushError != RD_KAFKA_RESP_ERR_NO_ERROR {
                context.logger.warning(
                    "Producer closed with undelivered messages; failing them",
                    metadata: ["kafka.outstanding": "\(rd_kafka_outq_len(handle))"]
                )
            }
            if running {
                context.stopPolling.store(true, ordering: .relaxed)
                context.pollThreadStopped.wait()
            }
            KafkaProducer.purgeAndDestroy(client, context: context)
        }
        self.calls.stop()
        context.closed.set()
    }
}

extension KafkaProducer {
    /// Fails what is still queued or in flight, serves those delivery reports (so every continuation is
    /// resumed), and frees the handle. Runs after the poll thread stopped.
    fileprivate static func purgeAndDestroy(_ client: RDKafkaClient, context: ProducerContext) {
        client.stopAccepting()
        let handle = client.pointer
        _ = rd_kafka_purge(handle, RD_KAFKA_PURGE_F_QUEUE | RD_KAFKA_PURGE_F_INFLIGHT)
        let deadline = ContinuousClock.now.advanced(by: .seconds(5))
        while context.inFlightCount > 0, ContinuousClock.now < deadline {
            rd_kafka_poll(handle, 50)
        }
        client.destroy()
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

/// Where a produced message's delivery report goes: subclass it and override ``delivered(_:)``. It travels
/// through librdkafka as the message's opaque, retained until the report (or the refusal) comes.
open class KafkaDeliveryHandler: @unchecked Sendable {
    /// A handler.
    public init() {}

    /// Called exactly once, on the producer's poll thread (or at once when the message is refused): the offset
    /// the broker gave the message, or why it was not delivered.
    open func delivered(_ result: Result<KafkaDelivery, KafkaError>) {}
}

/// A closure as a send's handler.
package final class DeliveryBox: KafkaDeliveryHandler, @unchecked Sendable {
    let completion: @Sendable (Result<KafkaDelivery, KafkaError>) -> Void

    /// Calls `completion` with the report.
    package init(_ completion: @escaping @Sendable (Result<KafkaDelivery, KafkaError>) -> Void) {
        self.completion = completion
    }

    override package func delivered(_ result: Result<KafkaDelivery, KafkaError>) {
        self.completion(result)
    }
}

extension KafkaProducer {
    /// This producer with ``run()`` started in a task of its own, which ends with the close: for a tool or a test
    /// that makes a producer, uses it and closes it. The bridge runs its producer in its service group instead.
    package func running() -> KafkaProducer {
        Task { await self.run() }
        return self
    }
}

/// A delivery report a task waits for (``KafkaProducer/send(topic:key:value:headers:partition:)``). The wait is not
/// cut short by cancellation: once produced, the message's report is the answer.
final class AwaitedDelivery: KafkaDeliveryHandler, @unchecked Sendable {
    private enum State {
        case waiting(CheckedContinuation<KafkaDelivery, any Error>?)
        case reported(Result<KafkaDelivery, KafkaError>)
    }

    private let state = Mutex(State.waiting(nil))

    override func delivered(_ result: Result<KafkaDelivery, KafkaError>) {
        let waiting = self.state.withLock { state -> CheckedContinuation<KafkaDelivery, any Error>? in
            guard case .waiting(let continuation) = state else { return nil }
            state = .reported(result)
            return continuation
        }
        waiting?.resume(with: result.mapError { $0 })
    }

    /// The report: the delivery, or its error thrown.
    func value() async throws -> KafkaDelivery {
        try await withCheckedThrowingContinuation { continuation in
            let reported = self.state.withLock { state -> Result<KafkaDelivery, KafkaError>? in
                switch state {
                case .reported(let result): return result
                case .waiting:
                    state = .waiting(continuation)
                    return nil
                }
            }
            if let reported { continuation.resume(with: reported.mapError { $0 }) }
        }
    }
}

/// The producer's state shared by its poll thread, its delivery reports and its package API.
final class ProducerContext: Sendable {
    let logger: Logger
    /// Whether ``KafkaProducer/run()`` started the poll thread.
    let phase = Mutex(ClientPhase.idle)
    let stopPolling = Atomic<Bool>(false)
    let destroyWhenStopped = Atomic<Bool>(false)
    let pollThreadStopped = DispatchSemaphore(value: 0)
    /// ``KafkaProducer/queueFullRefusalCount``.
    let queueFullRefusals = Atomic<Int>(0)
    /// Messages handed to librdkafka and not yet reported, and reports not yet passed to a waiting sender.
    private struct Deliveries {
        var inFlight = 0
        var reported = 0
    }

    private let deliveries = AsyncCondition(Deliveries())
    /// Set once ``KafkaProducer/close(timeout:)`` finished.
    let closed = AsyncCondition(false)
    let fatal = Mutex<KafkaError?>(nil)

    init(logger: Logger) {
        self.logger = logger
    }

    var inFlightCount: Int {
        self.deliveries.read { $0.inFlight }
    }

    func willProduce() {
        self.deliveries.withLock { $0.inFlight += 1 }
    }

    /// One message left librdkafka (delivered, failed, or never accepted): the oldest sender waiting for room in
    /// its queue goes on.
    func didDeliver() {
        self.deliveries.withLock { deliveries in
            deliveries.inFlight -= 1
            deliveries.reported += 1
        } settle: { deliveries, waiting in
            // A report nobody waits for is not kept: a later sender tries librdkafka's queue itself first, and waits
            // only when that is full again.
            if waiting == 0 { deliveries.reported = 0 }
        }
    }

    /// A message librdkafka refused (its queue is full, or the message is invalid) never entered it: no longer in
    /// flight, but no report either, so it lets no waiting sender go on. When it did, two senders waiting for room in
    /// a full queue woke each other in turn with their refusals, on every core, for as long as the brokers were
    /// away (issue 28).
    func didNotProduce() {
        self.deliveries.withLock { $0.inFlight -= 1 }
    }

    /// Returns `true` after the next delivery report that no other waiting sender took (at once when nothing is in
    /// flight to report); `false` at once when the task is cancelled, so that no sender retries a full queue in a
    /// loop after cancellation. Senders wait in turn: one report lets one sender try again.
    func waitForDelivery() async -> Bool {
        let result = await self.deliveries.wait(inTurn: true) { deliveries -> Void? in
            if deliveries.reported > 0 {
                deliveries.reported -= 1
                return ()
            }
            return deliveries.inFlight == 0 ? () : nil
        }
        if case .satisfied = result { return true }
        return false
    }

    /// The name of the last topic a report was for: reports come in runs for one topic (the outcomes), and
    /// making a `String` for each one cost an allocation per record. Compared by its bytes, not by librdkafka's
    /// topic handle, whose memory may be reused for another topic.
    private let lastTopic = Mutex<String>("")

    private func topicName(_ handle: OpaquePointer) -> String {
        guard let cName = rd_kafka_topic_name(handle) else { return "" }
        let bytes = UnsafeBufferPointer(
            start: UnsafeRawPointer(cName).assumingMemoryBound(to: UInt8.self), count: strlen(cName))
        return self.lastTopic.withLock { last in
            if !last.utf8.elementsEqual(bytes) { last = String(decoding: bytes, as: UTF8.self) }
            return last
        }
    }

    func delivered(_ message: UnsafePointer<rd_kafka_message_t>) {
        let fields = message.pointee
        if let opaque = fields._private {
            let handler = Unmanaged<KafkaDeliveryHandler>.fromOpaque(opaque).takeRetainedValue()
            let topic = fields.rkt.map { self.topicName($0) } ?? ""
            let partition = KafkaPartition(topic: topic, partition: fields.partition)
            if fields.err == RD_KAFKA_RESP_ERR_NO_ERROR {
                handler.delivered(
                    .success(KafkaDelivery(partition: partition, offset: fields.offset >= 0 ? fields.offset : nil)))
            } else {
                handler.delivered(.failure(KafkaError(fields.err, context: "delivering to \(partition)")))
            }
        }
        self.didDeliver()
    }
}
