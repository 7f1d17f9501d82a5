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
            .producer,
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
                // Delivery reports and errors are served here, in the callbacks (ProducerContext.delivered).
                while !context.stopPolling.load(ordering: .relaxed) {
                    client.serveReports(waitingAtMost: 100)
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
        try self.client.raiseFatalErrorForTesting(reason: reason)
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
                handler.failed(
                    KafkaError.interruptedWaitingForRoom,
                    message: KafkaUndeliveredMessage(topic: topic, key: key, value: value, headers: headers))
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
        // Counted first: the report may come before produce returns.
        self.context.willProduce()
        do {
            try self.client.produce(
                topic: topic, partition: partition, key: key, value: value, headers: headers,
                opaque: opaque.toOpaque())
            return true
        } catch let error as KafkaError where error.code == .queueFull {
            self.context.didNotProduce()
            opaque.release()
            self.context.queueFullRefusals.add(1, ordering: .relaxed)
            return false
        } catch {
            self.context.didNotProduce()
            opaque.release()
            handler.failed(
                error as? KafkaError ?? KafkaError(code: .state, message: "\(error)"),
                message: KafkaUndeliveredMessage(topic: topic, key: key, value: value, headers: headers))
            return true
        }
    }

    /// Waits until every message sent so far is delivered or failed, at most `timeout`; throws
    /// `_TIMED_OUT` when some are still outstanding.
    package func flush(timeout: Duration) async throws {
        let client = self.client
        try await self.calls.run {
            try client.withHandle { _ in try client.flush(timeout: timeout) }
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
            do {
                try client.flush(timeout: timeout)
            } catch {
                context.logger.warning(
                    "Producer closed with undelivered messages; failing them",
                    metadata: ["kafka.outstanding": "\(client.outstandingMessageCount)"]
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
        client.purgeOutstanding()
        let deadline = ContinuousClock.now.advanced(by: .seconds(5))
        while context.inFlightCount > 0, ContinuousClock.now < deadline {
            client.serveReports(waitingAtMost: 50)
        }
        client.destroy()
    }
}

/// Where a produced message's delivery report goes: subclass it and override ``delivered(_:)`` and
/// ``failed(_:message:)``. It travels through librdkafka as the message's opaque, retained until the report (or the
/// refusal) comes.
open class KafkaDeliveryHandler: @unchecked Sendable {
    /// A handler.
    public init() {}

    /// The broker has the message, at this offset. Called at most once, and only if ``failed(_:message:)`` is not,
    /// on the producer's poll thread.
    open func delivered(_ delivery: KafkaDelivery) {}

    /// The message was not delivered: why, and the message as it was produced (its topic, key, value and headers,
    /// read back from librdkafka), so that a sender that may produce it again need not keep a copy of its own
    /// until the report. Called at most once, and only if ``delivered(_:)`` is not: on the producer's poll thread,
    /// or at once on the sending thread when the message is refused.
    open func failed(_ error: KafkaError, message: KafkaUndeliveredMessage) {}
}

/// A message the producer could not deliver, as it was produced.
public struct KafkaUndeliveredMessage: Sendable, Hashable {
    package var topic: String
    package var key: [UInt8]?
    package var value: [UInt8]?
    package var headers: [KafkaHeader]

    package init(topic: String, key: [UInt8]?, value: [UInt8]?, headers: [KafkaHeader]) {
        self.topic = topic
        self.key = key
        self.value = value
        self.headers = headers
    }
}

/// A closure as a send's handler.
package final class DeliveryBox: KafkaDeliveryHandler, @unchecked Sendable {
    let completion: @Sendable (Result<KafkaDelivery, KafkaError>) -> Void

    /// Calls `completion` with the report.
    package init(_ completion: @escaping @Sendable (Result<KafkaDelivery, KafkaError>) -> Void) {
        self.completion = completion
    }

    override package func delivered(_ delivery: KafkaDelivery) {
        self.completion(.success(delivery))
    }

    override package func failed(_ error: KafkaError, message: KafkaUndeliveredMessage) {
        self.completion(.failure(error))
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

    override func delivered(_ delivery: KafkaDelivery) {
        self.report(.success(delivery))
    }

    override func failed(_ error: KafkaError, message: KafkaUndeliveredMessage) {
        self.report(.failure(error))
    }

    private func report(_ result: Result<KafkaDelivery, KafkaError>) {
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
