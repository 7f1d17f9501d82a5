import APNSCore
import Foundation
import Logging
import PipelineTestSupport
import Prometheus
import Routing
import ServiceLifecycle
import Synchronization
import TestWaiting
import Testing
import Waiting

@testable import BridgeCore

// Pipeline logic against in-memory parts: the protocols' contracts, driven event by event. The same pipeline
// runs against librdkafka's mock cluster and the APNs simulator in the integration suite.

@Suite("Pipeline")
struct PipelineTests {
    @Test(
        "every event is accounted for: outcomes, invalid tokens, dead letters, unmatched; commits reach the end",
        arguments: [false, true])
    func accounting(takenAtOnce: Bool) async throws {
        let events = [
            TestEvent.json(offset: 0, #"{"tokens":["aa01","aa02"]}"#),
            TestEvent.json(offset: 1, #"{"tokens":["dead"]}"#),
            TestEvent.raw(offset: 2, "not json"),
            TestEvent.json(offset: 3, #"{"other":true}"#),
        ]
        let harness = Harness(events: events) { token in
            token == "dead"
                ? .answered(
                    APNSResponse(status: 410, reason: .unregistered, invalidSinceEpochMilliseconds: 1_700_000_000_000))
                : .answered(APNSResponse(status: 200, reason: nil, invalidSinceEpochMilliseconds: nil))
        }
        if takenAtOnce {
            harness.sink.takeAtOnce()
            // The outcome and invalid-token records of "dead" and one more fail once each: the outcome is
            // finished only once both of its records are acknowledged.
            harness.sink.failNext(3)
        }
        try await harness.runToEnd()
        let outcomes = harness.sink.values(topic: "pushbridge.outcomes")
        #expect(outcomes.count == 3)
        #expect(outcomes.filter { $0["status"] as? String == "delivered" }.count == 2)
        let rejected = try #require(outcomes.first { $0["status"] as? String == "rejected" })
        #expect(rejected["reason"] as? String == "Unregistered")
        #expect(rejected["http_status"] as? Int == 410)
        let invalid = harness.sink.values(topic: "pushbridge.invalid-tokens")
        #expect(invalid.count == 1)
        #expect(invalid.first?["invalid_since"] as? String == "2023-11-14T22:13:20.000Z")
        let deadLetters = harness.sink.records(topic: "pushbridge.dead-letters")
        #expect(deadLetters.count == 1)
        #expect(deadLetters.first?.value == Array("not json".utf8))
        #expect(harness.source.committed[PartitionID(topic: "in", partition: 0)] == 4)
        #expect(harness.source.closed)
    }

    @Test("an offset is not committed, nor its in-flight permit returned, before its records are acknowledged")
    func commitWaitsForAcknowledgement() async throws {
        let events = (0..<3).map { TestEvent.json(offset: Int64($0), #"{"tokens":["aa0\#($0)"]}"#) }
        let harness = Harness(events: events) { _ in
            .answered(APNSResponse(status: 200, reason: nil, invalidSinceEpochMilliseconds: nil))
        }
        harness.sink.holdAcknowledgements(forKey: "aa01")
        let run = Task { try await harness.pipeline.run() }
        try await harness.sink.waitFor(2, recordsOn: "pushbridge.outcomes")
        try await harness.source.waitFor(committed: 1)
        try await Task.sleep(for: .milliseconds(50))
        // Offset 2 is done, but offset 1's outcome is not acknowledged: the commit stays at 1, and its
        // notification still holds a permit although its task has ended.
        #expect(harness.source.committed[PartitionID(topic: "in", partition: 0)] == 1)
        #expect(harness.pipeline.inFlight == 1)
        harness.sink.releaseAcknowledgements()
        try await harness.source.waitFor(committed: 3)
        #expect(harness.pipeline.inFlight == 0)
        harness.source.finish()
        try await run.value
    }

    @Test(
        "a record Kafka fails is published again until acknowledged; only then is its offset committed",
        arguments: [false, true])
    func failedPublishesAreRetried(takenAtOnce: Bool) async throws {
        let events = (0..<3).map { TestEvent.json(offset: Int64($0), #"{"tokens":["aa0\#($0)"]}"#) }
        var configuration = PipelineConfiguration()
        configuration.publishBackoff = Backoff(initial: .milliseconds(20), maximum: .milliseconds(50))
        let harness = Harness(events: events, configuration: configuration) { _ in
            .answered(APNSResponse(status: 200, reason: nil, invalidSinceEpochMilliseconds: nil))
        }
        if takenAtOnce { harness.sink.takeAtOnce() }
        harness.sink.failNext(4)
        try await harness.runToEnd()
        #expect(harness.sink.failures == 4)
        let outcomes = harness.sink.values(topic: "pushbridge.outcomes")
        #expect(outcomes.compactMap { $0["device_token"] as? String }.sorted() == ["aa00", "aa01", "aa02"])
        #expect(harness.source.committed[PartitionID(topic: "in", partition: 0)] == 3)
        #expect(harness.pipeline.inFlight == 0)
    }

    @Test("a partition revoked while paused comes back resumed when no reason to pause is left")
    func pauseStateIsRestoredOnReassignment() {
        // MemorySource keeps pause flags across revocation and reassignment, as librdkafka does.
        let source = MemorySource(events: [])
        let flow = FlowController(source: source, maxCount: 1, maxBytes: 1 << 20)
        let partition = PartitionID(topic: "in", partition: 0)
        flow.assigned([partition])
        flow.setHalted(true)
        #expect(source.isPaused(partition))
        flow.revoked([partition])
        // The halt ends while nothing is assigned: there is nothing to resume yet.
        flow.setHalted(false)
        flow.assigned([partition])
        #expect(!source.isPaused(partition))
        flow.setHalted(true)
        flow.revoked([partition])
        flow.assigned([partition])
        #expect(source.isPaused(partition))
    }

    @Test(
        "events of a batch fetched before a revocation are dropped when the partition comes back, and the re-fetched ones are processed"
    )
    func staleBatchAfterReassignment() async throws {
        // The consume loop waits for room (max_in_flight 1) in the middle of a batch while its partition is
        // revoked and assigned back; librdkafka then delivers the partition again from the committed offset.
        let partition = PartitionID(topic: "in", partition: 0)
        let first = (0..<3).map { TestEvent.json(offset: Int64($0), #"{"tokens":["aa0\#($0)"]}"#) }
        let again = (0..<3).map { TestEvent.json(offset: Int64($0), #"{"tokens":["aa0\#($0)"]}"#, generation: 2) }
        let release = Flag()
        var configuration = PipelineConfiguration(maxInFlight: 1)
        configuration.drainTimeout = .milliseconds(100)
        let harness = Harness(events: first, configuration: configuration) { _ in
            while !release.isSet { try? await Task.sleep(for: .milliseconds(2)) }
            return .answered(APNSResponse(status: 200, reason: nil, invalidSinceEpochMilliseconds: nil))
        }
        let run = Task { try await harness.pipeline.run() }
        try await harness.waitFor(inFlight: 1)
        try await Task.sleep(for: .milliseconds(20))
        let listener = try #require(harness.source.listener)
        await listener.partitionsRevoked([partition])
        await listener.partitionsAssigned([partition], generation: 2)
        harness.source.deliver(again)
        release.set()
        try await harness.source.waitFor(committed: 3, of: partition)
        try await harness.drained()
        let delivered = harness.sink.values(topic: "pushbridge.outcomes").compactMap { $0["device_token"] as? String }
        // Offset 0 was sent under the first assignment, and is sent again (at-least-once); offset 1, begun before the
        // revocation and waiting for room, is not sent once room comes back (its partition moved), nor is offset 2
        // of the stale batch: the new assignment sends them.
        #expect(delivered.sorted() == ["aa00", "aa00", "aa01", "aa02"])
        harness.source.finish()
        try await run.value
    }

    @Test("retryable answers are retried, then the outcome is failed after max attempts")
    func retriesThenFails() async throws {
        let calls = Tally()
        let harness = Harness(
            events: [TestEvent.json(offset: 0, #"{"tokens":["aa01","bb02"]}"#)],
            configuration: PipelineConfiguration(
                maxAttempts: 3, retryBackoff: Backoff(initial: .milliseconds(1), maximum: .milliseconds(2))
            )
        ) { token in
            let attempt = calls.add(token)
            if token == "aa01" && attempt >= 2 {
                return .answered(APNSResponse(status: 200, reason: nil, invalidSinceEpochMilliseconds: nil))
            }
            return .answered(APNSResponse(status: 503, reason: .serviceUnavailable, invalidSinceEpochMilliseconds: nil))
        }
        try await harness.runToEnd()
        let outcomes = harness.sink.values(topic: "pushbridge.outcomes")
        let delivered = try #require(outcomes.first { $0["device_token"] as? String == "aa01" })
        #expect(delivered["status"] as? String == "delivered")
        #expect(delivered["attempts"] as? Int == 2)
        let failed = try #require(outcomes.first { $0["device_token"] as? String == "bb02" })
        #expect(failed["status"] as? String == "failed")
        #expect(failed["reason"] as? String == "ServiceUnavailable")
        #expect(failed["attempts"] as? Int == 3)
    }

    @Test("an expired notification is never sent and its outcome is expired")
    func expired() async throws {
        let calls = Tally()
        let harness = Harness(
            events: [TestEvent.json(offset: 0, #"{"tokens":["aa01"]}"#)],
            expiration: 1_000
        ) { token in
            calls.add(token)
            return .answered(APNSResponse(status: 200, reason: nil, invalidSinceEpochMilliseconds: nil))
        }
        try await harness.runToEnd()
        #expect(calls.total == 0)
        #expect(harness.sink.values(topic: "pushbridge.outcomes").first?["status"] as? String == "expired")
    }

    @Test("a systemic fault halts the line: not ready, partitions paused, nothing published, then it resumes")
    func haltsAndResumes() async throws {
        let accepting = Flag()
        let events = (0..<5).map { TestEvent.json(offset: Int64($0), #"{"tokens":["aa0\#($0)"]}"#) }
        let harness = Harness(
            events: events,
            configuration: PipelineConfiguration(
                haltProbeBackoff: Backoff(initial: .milliseconds(5), maximum: .milliseconds(10)))
        ) { _ in
            accepting.isSet
                ? .answered(APNSResponse(status: 200, reason: nil, invalidSinceEpochMilliseconds: nil))
                : .answered(
                    APNSResponse(status: 403, reason: .invalidProviderToken, invalidSinceEpochMilliseconds: nil))
        }
        let run = Task { try await harness.pipeline.run() }
        try #require(await harness.pipeline.gate.waitUntilHalted(deadline: .now + .seconds(60)) != nil)
        #expect(harness.pipeline.readiness == .notReady("halted: app default: InvalidProviderToken"))
        try await harness.source.waitUntilPaused(PartitionID(topic: "in", partition: 0))
        try await Task.sleep(for: .milliseconds(50))
        #expect(harness.sink.values(topic: "pushbridge.outcomes").isEmpty)
        #expect(harness.source.committed.isEmpty)
        accepting.set()
        try await harness.sink.waitFor(5, recordsOn: "pushbridge.outcomes")
        #expect(harness.pipeline.readiness == .ready)
        #expect(!harness.source.isPaused(PartitionID(topic: "in", partition: 0)))
        #expect(harness.sink.values(topic: "pushbridge.outcomes").allSatisfy { $0["status"] as? String == "delivered" })
        try await harness.source.waitFor(committed: 5)
        harness.source.finish()
        try await run.value
    }

    @Test("a dead letter the broker refuses as too large is cut down until it fits, and its offset is committed")
    func oversizedDeadLetterIsRefitted() async throws {
        let big = String(repeating: "x", count: 200_000)
        var configuration = PipelineConfiguration()
        configuration.publishBackoff = Backoff(initial: .milliseconds(1), maximum: .milliseconds(2))
        let harness = Harness(events: [TestEvent.raw(offset: 0, big)], configuration: configuration) { _ in
            .answered(APNSResponse(status: 200, reason: nil, invalidSinceEpochMilliseconds: nil))
        }
        harness.sink.refuseRecords(largerThan: 30_000)
        try await harness.runToEnd()
        let letters = harness.sink.records(topic: "pushbridge.dead-letters")
        let letter = try #require(letters.first)
        #expect(letters.count == 1)
        #expect((letter.value?.count ?? 0) <= 30_000)
        #expect(letter.value.map { Array(big.utf8.prefix($0.count)) == $0 } == true)
        let headers = Dictionary(letter.headers.map { ($0.0, String(decoding: $0.1 ?? [], as: UTF8.self)) }) { a, _ in a
        }
        #expect(headers["pushbridge-truncated"] == "value")
        #expect(headers["pushbridge-original-size"] == "200000")
        #expect(harness.sink.failures >= 1)
        #expect(harness.source.committed[PartitionID(topic: "in", partition: 0)] == 1)
    }

    @Test("a record Kafka keeps failing makes the bridge not ready after the stall timeout, and ready once published")
    func publishStallIsNotReady() async throws {
        var configuration = PipelineConfiguration()
        configuration.publishBackoff = Backoff(initial: .milliseconds(5), maximum: .milliseconds(10))
        // Long enough that the check of a short failure below comes well before it on a loaded machine (with
        // 100 ms, a CI run once checked after the timeout had passed).
        configuration.publishStallTimeout = .seconds(2)
        let harness = Harness(
            events: [TestEvent.json(offset: 0, #"{"tokens":["aa00"]}"#)], configuration: configuration
        ) { _ in
            .answered(APNSResponse(status: 200, reason: nil, invalidSinceEpochMilliseconds: nil))
        }
        harness.sink.failNext(1_000_000)
        let run = Task { try await harness.pipeline.run() }
        try #require(await harness.pipeline.unpublished.waitFor(count: 1, timeout: .seconds(60)))
        #expect(harness.pipeline.readiness == .ready, "a short failure is not a stall")
        try await waitUntil { !harness.pipeline.readiness.isReady }
        let reason = try #require(harness.pipeline.readiness.reason)
        #expect(reason.contains("not published"))
        #expect(reason.contains("Message timed out"))
        harness.sink.failNext(0)
        try await harness.source.waitFor(committed: 1)
        #expect(harness.pipeline.readiness == .ready)
        #expect(harness.pipeline.unpublished.count == 0)
        harness.source.finish()
        try await run.value
    }

    @Test("bytes in flight stay within max_in_flight_bytes, except for one oversized event alone")
    func byteBound() async throws {
        let payload = String(repeating: "y", count: 60_000)
        let events = (0..<12).map {
            TestEvent.json(offset: Int64($0), #"{"tokens":["aa0\#($0)"],"pad":"\#(payload)"}"#)
        }
        var configuration = PipelineConfiguration()
        configuration.maxInFlightBytes = 200_000
        let highest = Concurrency()
        let harness = Harness(events: events, configuration: configuration) { _ in
            highest.enter()
            try? await Task.sleep(for: .milliseconds(5))
            highest.leave()
            return .answered(APNSResponse(status: 200, reason: nil, invalidSinceEpochMilliseconds: nil))
        }
        let peak = PeakBytes()
        let run = Task { try await harness.runToEnd() }
        while !run.isCancelled {
            peak.observe(harness.pipeline.inFlightBytes)
            if harness.source.committed[PartitionID(topic: "in", partition: 0)] == 12 { break }
            try await Task.sleep(for: .milliseconds(1))
        }
        try await run.value
        #expect(peak.highest <= 200_000)
        #expect(peak.highest > 0)
        #expect(highest.highest <= 3, "each event holds about 61 KB: at most three fit in 200 KB")
        #expect(harness.sink.values(topic: "pushbridge.outcomes").count == 12)
    }

    @Test("an event of an assignment announced late is processed, not dropped; one of a revoked assignment is dropped")
    func eventBeforeItsAssignmentIsAnnounced() async throws {
        // The source announces an assignment through a task the pipeline may run late on a busy machine;
        // events stamped with that assignment can arrive first, and the source never delivers them again.
        let partition = PartitionID(topic: "in", partition: 0)
        let harness = Harness(events: [TestEvent.json(offset: 0, #"{"tokens":["aa00"]}"#)]) { _ in
            .answered(APNSResponse(status: 200, reason: nil, invalidSinceEpochMilliseconds: nil))
        }
        let run = Task { try await harness.pipeline.run() }
        try await harness.source.waitFor(committed: 1, of: partition)
        let listener = try #require(harness.source.listener)
        await listener.partitionsRevoked([partition])
        // Generation 2 was assigned, but the pipeline has not heard of it yet.
        harness.source.deliver([
            TestEvent.json(offset: 0, #"{"tokens":["bb00"]}"#, generation: 1),
            TestEvent.json(offset: 1, #"{"tokens":["aa01"]}"#, generation: 2),
        ])
        try await harness.sink.waitFor(2, recordsOn: "pushbridge.outcomes")
        await listener.partitionsAssigned([partition], generation: 2)
        try await harness.source.waitFor(committed: 2, of: partition)
        try await harness.drained()
        let tokens = harness.sink.values(topic: "pushbridge.outcomes").compactMap { $0["device_token"] as? String }
        #expect(tokens.sorted() == ["aa00", "aa01"], "the revoked generation's event is dropped")
        harness.source.finish()
        try await run.value
    }

    @Test("graceful shutdown of a halted, full line ends within the drain timeout instead of hanging")
    func shutdownWhileHaltedAndFull() async throws {
        let events = (0..<6).map { TestEvent.json(offset: Int64($0), #"{"tokens":["aa0\#($0)"]}"#) }
        var configuration = PipelineConfiguration(maxInFlight: 2)
        configuration.drainTimeout = .milliseconds(200)
        configuration.haltProbeBackoff = Backoff(initial: .milliseconds(5), maximum: .milliseconds(10))
        let harness = Harness(events: events, configuration: configuration) { _ in
            .answered(APNSResponse(status: 403, reason: .invalidProviderToken, invalidSinceEpochMilliseconds: nil))
        }
        let group = ServiceGroup(
            configuration: .init(services: [.init(service: harness.pipeline)], logger: Logger(label: "test"))
        )
        let run = Task { try await group.run() }
        try #require(await harness.pipeline.gate.waitUntilHalted(deadline: .now + .seconds(60)) != nil)
        try await harness.waitFor(inFlight: 2)
        try await Task.sleep(for: .milliseconds(50))
        let stopped = ContinuousClock.now
        await group.triggerGracefulShutdown()
        let finished = Flag()
        let watchdog = Task {
            try await Task.sleep(for: .seconds(60))
            if !finished.isSet { run.cancel() }
        }
        try await run.value
        finished.set()
        watchdog.cancel()
        // Tells the 200 ms drain timeout (3.4 s under the parallel suite, shutdown included) from the 60 s
        // watchdog: halfway.
        #expect(ContinuousClock.now - stopped < .seconds(30), "shutdown hung until the watchdog cancelled it")
        #expect(harness.source.committed.isEmpty)
        #expect(harness.source.closed)
    }

    @Test("in-flight never exceeds max_in_flight")
    func backpressure() async throws {
        let concurrency = Concurrency()
        let tokens = (0..<40).map { String(format: "%04x", $0) }
        let events = [TestEvent.json(offset: 0, #"{"tokens":[\#(tokens.map { "\"\($0)\"" }.joined(separator: ","))]}"#)]
        let harness = Harness(events: events, configuration: PipelineConfiguration(maxInFlight: 3)) { _ in
            concurrency.enter()
            try? await Task.sleep(for: .milliseconds(2))
            concurrency.leave()
            return .answered(APNSResponse(status: 200, reason: nil, invalidSinceEpochMilliseconds: nil))
        }
        try await harness.runToEnd()
        #expect(concurrency.highest <= 3)
        #expect(concurrency.highest >= 2)
        #expect(harness.sink.values(topic: "pushbridge.outcomes").count == 40)
    }

    @Test("graceful shutdown drains in-flight work, flushes, commits and closes")
    func gracefulShutdown() async throws {
        let events = (0..<10).map { TestEvent.json(offset: Int64($0), #"{"tokens":["aa0\#($0)"]}"#) }
        let harness = Harness(events: events) { _ in
            try? await Task.sleep(for: .milliseconds(20))
            return .answered(APNSResponse(status: 200, reason: nil, invalidSinceEpochMilliseconds: nil))
        }
        let group = ServiceGroup(
            configuration: .init(services: [.init(service: harness.pipeline)], logger: Logger(label: "test"))
        )
        let run = Task { try await group.run() }
        try await harness.waitForLane("default", "work in flight") { inFlight, _ in inFlight > 0 }
        await group.triggerGracefulShutdown()
        try await run.value
        #expect(
            harness.sink.values(topic: "pushbridge.outcomes").count == harness.source.committed[
                PartitionID(topic: "in", partition: 0)
            ].map(Int.init) ?? -1)
        #expect(harness.sink.flushed)
        #expect(harness.source.closed)
    }
}

// MARK: In-memory parts

private enum TestEvent {
    static func json(offset: Int64, _ text: String, generation: UInt64 = 1) -> SourceEvent {
        raw(offset: offset, text, generation: generation)
    }
    static func raw(offset: Int64, _ text: String, generation: UInt64 = 1) -> SourceEvent {
        SourceEvent(
            source: SourceCoordinates(topic: "in", partition: 0, offset: offset, key: Array("k\(offset)".utf8)),
            value: Array(text.utf8), headers: [], timestampMilliseconds: nil, assignmentGeneration: generation
        )
    }
}

final class MemorySource: EventSource {
    private struct State {
        var committed: [PartitionID: Int64] = [:]
        var paused: Set<PartitionID> = []
        var closed = false
        var continuation: AsyncThrowingStream<[SourceEvent], any Error>.Continuation?
        var listener: (any RebalanceListener)?
    }
    private let events: [SourceEvent]
    /// Every change of it wakes the tests' waits (``waitFor(committed:of:)``, ``waitUntilPaused(_:)``).
    private let state = AsyncCondition(State())

    init(events: [SourceEvent]) { self.events = events }

    func start(listener: any RebalanceListener) async throws -> AsyncThrowingStream<[SourceEvent], any Error> {
        // in[0], and every other partition its events come from.
        let partitions = Set(self.events.map(\.partition)).union([PartitionID(topic: "in", partition: 0)])
        await listener.partitionsAssigned(
            partitions.sorted { ($0.topic, $0.partition) < ($1.topic, $1.partition) }, generation: 1)
        let (stream, continuation) = AsyncThrowingStream.makeStream(of: [SourceEvent].self)
        continuation.yield(self.events)
        self.state.withLock {
            $0.continuation = continuation
            $0.listener = listener
        }
        return stream
    }
    func markFinished(_ partition: PartitionID, nextOffset: Int64) {
        self.state.withLock { $0.committed[partition] = nextOffset }
    }
    func pause(_ partitions: [PartitionID]) { self.state.withLock { $0.paused.formUnion(partitions) } }
    func resume(_ partitions: [PartitionID]) { self.state.withLock { $0.paused.subtract(partitions) } }
    func commit() async {}
    func lag() async -> [PartitionLag] { [] }
    func close() async { self.state.withLock { $0.closed = true } }
    func finish() { self.state.withLock { $0.continuation }?.finish() }
    /// Delivers another batch, as after a rebalance.
    func deliver(_ events: [SourceEvent]) { self.state.withLock { $0.continuation }?.yield(events) }
    var listener: (any RebalanceListener)? { self.state.withLock { $0.listener } }

    var committed: [PartitionID: Int64] { self.state.withLock { $0.committed } }
    var closed: Bool { self.state.withLock { $0.closed } }
    func isPaused(_ partition: PartitionID) -> Bool { self.state.withLock { $0.paused.contains(partition) } }

    /// Waits until the pipeline marked `partition` finished up to `nextOffset` (its commit position is it).
    func waitFor(committed nextOffset: Int64, of partition: PartitionID = PartitionID(topic: "in", partition: 0))
        async throws
    {
        try await waitUntil("\(partition) committed at \(nextOffset)", self.state) {
            $0.committed[partition] == nextOffset
        }
    }

    /// Waits until the pipeline marked anything of `partition` finished.
    func waitForAnyCommit(of partition: PartitionID) async throws {
        try await waitUntil("a commit of \(partition)", self.state) { $0.committed[partition] != nil }
    }

    /// Waits until the pipeline paused `partition`.
    func waitUntilPaused(_ partition: PartitionID) async throws {
        try await waitUntil("\(partition) paused", self.state) { $0.paused.contains(partition) }
    }
}

final class MemorySink: RecordSink {
    private struct State {
        var records: [OutgoingRecord] = []
        var heldKey: [UInt8]?
        var held: [(record: OutgoingRecord, acknowledgement: RecordAcknowledgement)] = []
        var flushed = false
        var failuresLeft = 0
        var failures = 0
        var maxRecordBytes = Int.max
        var takesAtOnce = false
    }
    /// Every change of it wakes the tests' waits (``waitFor(_:recordsOn:)``).
    private let state = AsyncCondition(State())

    /// Records a record and acknowledges it at once, unless acknowledgements for its key are held, or fails
    /// it (as a broker that did not take it) while failures are due.
    func publish(_ record: OutgoingRecord, acknowledgement: RecordAcknowledgement) async {
        self.take(record, acknowledgement)
    }

    /// With ``takesAtOnce``, takes every record without a wait, as the Kafka sink does while librdkafka's queue
    /// has room (the pipeline's outcomes then come back through their acknowledgement objects); otherwise
    /// takes none, so every record goes through ``publish(_:acknowledgement:)`` in a task.
    func publishNow(_ record: OutgoingRecord, acknowledgement: RecordAcknowledgement) -> Bool {
        guard self.state.withLock({ $0.takesAtOnce }) else { return false }
        self.take(record, acknowledgement)
        return true
    }

    func takeAtOnce() { self.state.withLock { $0.takesAtOnce = true } }

    /// Fails a record as a sink does: handing it back with the error (``RecordAcknowledgement/failed(_:record:)``).
    private func take(_ record: OutgoingRecord, _ acknowledgement: RecordAcknowledgement) {
        let size =
            (record.key?.count ?? 0) + (record.value?.count ?? 0)
            + record.headers.reduce(0) { total, header in total + header.0.utf8.count + (header.1?.count ?? 0) }
        if size > self.state.withLock({ $0.maxRecordBytes }) {
            // As a broker whose topic takes smaller messages than the producer sends.
            self.state.withLock { $0.failures += 1 }
            Thread.detachNewThread {
                acknowledgement.failed(RecordTooLargeError(detail: "Broker: Message size too large"), record: record)
            }
            return
        }
        let failed = self.state.withLock { state -> Bool in
            guard state.failuresLeft > 0 else { return false }
            state.failuresLeft -= 1
            state.failures += 1
            return true
        }
        if failed {
            // Reported from another thread, as librdkafka's delivery reports are.
            Thread.detachNewThread { acknowledgement.failed(KafkaTestError(), record: record) }
            return
        }
        let held = self.state.withLock { state -> Bool in
            if state.heldKey != nil, state.heldKey == record.key {
                state.held.append((record, acknowledgement))
                return true
            }
            state.records.append(record)
            return false
        }
        if !held { acknowledgement.acknowledged() }
    }
    func flush(timeout: Duration) async throws { self.state.withLock { $0.flushed = true } }

    /// Fails records larger than `bytes` as too large.
    func refuseRecords(largerThan bytes: Int) { self.state.withLock { $0.maxRecordBytes = bytes } }

    /// Fails the next `count` publishes.
    func failNext(_ count: Int) { self.state.withLock { $0.failuresLeft = count } }
    var failures: Int { self.state.withLock { $0.failures } }

    func holdAcknowledgements(forKey key: String) { self.state.withLock { $0.heldKey = Array(key.utf8) } }
    func releaseAcknowledgements() {
        let held = self.state.withLock { state in
            state.heldKey = nil
            defer { state.held = [] }
            state.records += state.held.map(\.record)
            return state.held
        }
        for entry in held { entry.acknowledgement.acknowledged() }
    }
    func records(topic: String) -> [OutgoingRecord] { self.state.withLock { $0.records.filter { $0.topic == topic } } }
    func values(topic: String) -> [[String: Any]] {
        self.records(topic: topic).compactMap { record in
            record.value.flatMap { try? JSONSerialization.jsonObject(with: Data($0)) as? [String: Any] }
        }
    }
    var flushed: Bool { self.state.withLock { $0.flushed } }

    /// Waits until `count` records were taken for `topic`.
    func waitFor(_ count: Int, recordsOn topic: String) async throws {
        try await waitUntil("\(count) records on \(topic)", self.state) { state in
            state.records.lazy.filter { $0.topic == topic }.count == count
        }
    }
}

private struct KafkaTestError: Error, CustomStringConvertible {
    var description: String { "Local: Message timed out (test)" }
}

struct Harness {
    let source: MemorySource
    let sink = MemorySink()
    let pipeline: Pipeline

    init(
        events: [SourceEvent],
        configuration: PipelineConfiguration = PipelineConfiguration(),
        expiration: Int64? = nil,
        answer: @escaping @Sendable (String) async -> APNSResult
    ) {
        self.init(
            events: events, configuration: configuration, mapper: TokensMapper(expiration: expiration),
            sender: ScriptedSender(answer: answer))
    }

    init(
        events: [SourceEvent], configuration: PipelineConfiguration = PipelineConfiguration(), mapper: any EventMapper,
        sender: any NotificationSender, metrics: BridgeMetrics = BridgeMetrics()
    ) {
        self.source = MemorySource(events: events)
        self.pipeline = Pipeline(
            source: self.source, mapper: mapper, sender: sender, sink: self.sink, configuration: configuration,
            metrics: metrics, logger: Logger(label: "test")
        )
    }

    /// Waits until nothing is in flight in the pipeline (its lanes' and lines' room is all back).
    func drained() async throws {
        try requireInTime(
            await self.pipeline.waitUntilEmpty(timeout: .seconds(60)), "the pipeline's drain", within: .seconds(60))
    }

    /// Waits until `condition` holds for the lane `lane` (the line's own without lanes): its pieces in flight, and
    /// whether it is stalled.
    func waitForLane(
        _ lane: String = "default", _ what: String,
        until condition: @escaping @Sendable (_ inFlight: Int, _ stalled: Bool) -> Bool
    ) async throws {
        try requireInTime(
            await self.pipeline.waitForLane(lane, timeout: .seconds(60), until: condition), "lane \(lane): \(what)",
            within: .seconds(60))
    }

    /// Waits until `count` pieces are in flight in the lane `lane` (the line's own without lanes).
    func waitFor(inFlight count: Int, lane: String = "default") async throws {
        try await self.waitForLane(lane, "\(count) in flight") { inFlight, _ in inFlight == count }
    }

    /// Runs until every event's records are published, then ends the stream and waits for the drain.
    func runToEnd() async throws {
        let run = Task { try await self.pipeline.run() }
        try await self.source.waitForAnyCommit(of: PartitionID(topic: "in", partition: 0))
        try await self.drained()
        self.source.finish()
        try await run.value
    }
}

private final class Tally: Sendable {
    private let counts = Mutex<[String: Int]>([:])
    @discardableResult
    func add(_ key: String) -> Int {
        self.counts.withLock {
            $0[key, default: 0] += 1; return $0[key]!
        }
    }
    var total: Int { self.counts.withLock { $0.values.reduce(0, +) } }
}

private final class Flag: Sendable {
    private let value = Mutex(false)
    func set() { self.value.withLock { $0 = true } }
    var isSet: Bool { self.value.withLock { $0 } }
}

private final class PeakBytes: Sendable {
    private let value = Mutex(0)
    func observe(_ bytes: Int) { self.value.withLock { $0 = max($0, bytes) } }
    var highest: Int { self.value.withLock { $0 } }
}

/// How many tasks are inside a section at once, and the most ever seen (the pipeline's and the flow control's
/// tests).
final class Concurrency: Sendable {
    private let state = Mutex((current: 0, highest: 0))
    func enter() {
        self.state.withLock {
            $0.current += 1; $0.highest = max($0.highest, $0.current)
        }
    }
    func leave() { self.state.withLock { $0.current -= 1 } }
    var highest: Int { self.state.withLock { $0.highest } }
}

// MARK: Per-key order and coalescing (routes with ordering_key / coalesce)

@Suite("Pipeline: per-key order")
struct PipelineOrderingTests {
    /// A route of topic `in` keyed by `{{activity}}`, with the payload naming the activity and the event's sequence
    /// number so the sender can tell them apart.
    func mapper(coalesce: Bool = false) throws -> RouterMapper {
        let payload: JSONValue = .object([
            (key: "aps", value: .object([(key: "content-state", value: .object([]))])),
            (key: "activity", value: .string("{{activity}}")),
            (key: "seq", value: .string("{{seq}}")),
        ])
        let route = RouteSpec(
            name: "live", inputTopic: "in", deviceTokens: "{{token}}", topic: "com.example", pushType: "liveactivity",
            payload: payload, orderingKey: "{{activity}}", coalesce: coalesce)
        return RouterMapper(router: try Router(routes: [route]))
    }

    /// An event of `activity` at `offset`; its payload's sequence number is `seq`, the offset unless given.
    static func event(
        offset: Int64, activity: String, token: String = "aa01", partition: Int32 = 0, seq: Int64? = nil
    ) -> SourceEvent {
        SourceEvent(
            source: SourceCoordinates(topic: "in", partition: partition, offset: offset, key: nil),
            value: Array(#"{"activity":"\#(activity)","seq":\#(seq ?? offset),"token":"\#(token)"}"#.utf8), headers: [],
            timestampMilliseconds: nil, assignmentGeneration: 1)
    }

    @Test("one key's notifications go out one at a time in input order, retries included; other keys concurrently")
    func orderWithRetries() async throws {
        let events = (0..<120).map { Self.event(offset: Int64($0), activity: "a\($0 % 6)") }
        let sender = LineRecordingSender(latency: 0...3, retryableFirstAttempt: { $0 % 5 == 0 })
        let harness = Harness(
            events: events,
            configuration: PipelineConfiguration(
                maxInFlight: 40, maxAttempts: 3,
                retryBackoff: Backoff(initial: .milliseconds(1), maximum: .milliseconds(3))),
            mapper: try self.mapper(), sender: sender)
        try await harness.runToEnd()
        let outcomes = harness.sink.values(topic: "pushbridge.outcomes")
        #expect(outcomes.count == 120)
        #expect(outcomes.allSatisfy { $0["status"] as? String == "delivered" })
        let record = sender.record
        #expect(record.overlaps == [], "two notifications of one key were in flight at once")
        for activity in (0..<6).map({ "a\($0)" }) {
            let sent = record.sends[activity] ?? []
            let expected = Array(stride(from: Int(activity.dropFirst())!, to: 120, by: 6))
            // A retry repeats its notification at once; nothing of the key is sent in between.
            #expect(sent.deduplicatedRuns == expected, "\(activity): \(sent)")
        }
        #expect(record.retries > 0, "no retry happened: the test proves nothing about retries")
        #expect(record.highestConcurrency > 1, "keys did not go out concurrently")
        #expect(harness.source.committed[PartitionID(topic: "in", partition: 0)] == 120)
    }

    /// Before, the hot key's waiting notifications took every place in `max_in_flight`, consumption stopped, and every
    /// other key waited behind one device (issue 28: 640 of 800 other updates in 90 s).
    @Test(
        "a hot key holds back its own partition only: other partitions' keys go on while its line waits, and every key keeps its order"
    )
    func hotKeyHoldsBackOnlyItsPartition() async throws {
        let hotPartition = PartitionID(topic: "in", partition: 0)
        let otherPartition = PartitionID(topic: "in", partition: 1)
        // The hot key's events come first: without isolation, its line fills max_in_flight before the others are read.
        let hot = (0..<60).map { Self.event(offset: Int64($0), activity: "hot") }
        // Sequence numbers from 1000: only the hot key's #0 is held by the sender.
        let others = (0..<30).map {
            Self.event(offset: Int64($0), activity: "k\($0)", partition: 1, seq: 1000 + Int64($0))
        }
        let hold = Flag()
        let sender = LineRecordingSender(latency: 0...1, holdFirst: hold)
        var configuration = PipelineConfiguration(maxInFlight: 20)
        configuration.maxWaitingPerKey = 5
        let harness = Harness(
            events: hot + others, configuration: configuration, mapper: try self.mapper(), sender: sender)
        let run = Task { try await harness.pipeline.run() }
        // Every other key is delivered while the hot key's first notification is still unanswered.
        try await harness.source.waitFor(committed: 30, of: otherPartition)
        let whileHeld = sender.record
        #expect(whileHeld.sends["hot"] == [0], "the hot key went on before its first answer")
        #expect(harness.pipeline.deepestOrderingLine <= 5)
        #expect(harness.source.isPaused(hotPartition), "the held-back partition must be paused at the source")
        hold.set()
        try await harness.source.waitFor(committed: 60, of: hotPartition)
        try await harness.drained()
        #expect((sender.record.sends["hot"] ?? []) == Array(0..<60))
        #expect(!harness.source.isPaused(hotPartition), "the partition is resumed once its line drained")
        #expect(sender.record.overlaps == [])
        harness.source.finish()
        try await run.value
    }

    /// The notifications waiting behind the line's item in flight would otherwise go out after the partition moved,
    /// while its next owner sends the same key from the committed offset (issue 28).
    @Test(
        "a revocation drops the notifications waiting in their lines: only the one in flight is sent and awaited, and the commit stops before the first dropped"
    )
    func revocationDropsWaitingItems() async throws {
        let partition = PartitionID(topic: "in", partition: 0)
        let events = (0..<10).map { Self.event(offset: Int64($0), activity: "a0") }
        let hold = Flag()
        let sender = LineRecordingSender(latency: 0...0, holdFirst: hold)
        // A drain timeout far longer than the test: a revocation that waited for the dropped items would hang it.
        var configuration = PipelineConfiguration(maxInFlight: 20)
        configuration.drainTimeout = .seconds(300)
        let harness = Harness(
            events: events, configuration: configuration, mapper: try self.mapper(), sender: sender)
        let run = Task { try await harness.pipeline.run() }
        try await waitUntil { harness.pipeline.deepestOrderingLine == 9 }
        let listener = try #require(harness.source.listener)
        let revocation = Task { await listener.partitionsRevoked([partition]) }
        // The waiting nine leave at once and return their room; #0 is still in flight, and the revocation waits.
        try await waitUntil { harness.pipeline.deepestOrderingLine == 0 }
        #expect(harness.pipeline.inFlight == 1)
        hold.set()
        _ = try await withTimeout(.seconds(60), "the revocation") { await revocation.value }
        #expect(sender.record.sends["a0"] == [0], "a notification waiting in its line was sent after the revocation")
        #expect(harness.source.committed[partition] == 1, "the commit must stop before the first dropped event")
        #expect(harness.pipeline.inFlight == 0)
        harness.source.finish()
        try await run.value
    }

    @Test("a halted line keeps the order: notifications waiting in their line go out in order once it resumes")
    func haltKeepsOrder() async throws {
        let events = (0..<40).map { Self.event(offset: Int64($0), activity: "a\($0 % 4)") }
        let sender = LineRecordingSender(latency: 0...2, systemicCalls: 6)
        var configuration = PipelineConfiguration(maxInFlight: 20)
        configuration.haltProbeBackoff = Backoff(initial: .milliseconds(5), maximum: .milliseconds(10))
        let harness = Harness(events: events, configuration: configuration, mapper: try self.mapper(), sender: sender)
        try await harness.runToEnd()
        let outcomes = harness.sink.values(topic: "pushbridge.outcomes")
        #expect(outcomes.count == 40)
        #expect(outcomes.allSatisfy { $0["status"] as? String == "delivered" })
        let record = sender.record
        #expect(record.systemicAnswers == 6, "the line never halted: the test proves nothing")
        #expect(record.overlaps == [])
        for activity in (0..<4).map({ "a\($0)" }) {
            let expected = Array(stride(from: Int(activity.dropFirst())!, to: 40, by: 4))
            #expect((record.sends[activity] ?? []).deduplicatedRuns == expected, "\(activity)")
        }
    }

    @Test("fan-out: one event's notifications to different devices do not wait for each other")
    func keyIsPerDevice() async throws {
        let events = (0..<10).map { offset in
            SourceEvent(
                source: SourceCoordinates(topic: "in", partition: 0, offset: Int64(offset), key: nil),
                value: Array(#"{"activity":"x","seq":\#(offset),"token":["aa01","aa02","aa03"]}"#.utf8), headers: [],
                timestampMilliseconds: nil, assignmentGeneration: 1)
        }
        let sender = LineRecordingSender(latency: 2...4, keyIncludesToken: true)
        let harness = Harness(events: events, mapper: try self.mapper(), sender: sender)
        try await harness.runToEnd()
        #expect(harness.sink.values(topic: "pushbridge.outcomes").count == 30)
        let record = sender.record
        #expect(record.overlaps == [])
        #expect(record.highestConcurrency == 3, "the three devices of one activity must be in flight together")
        for token in ["aa01", "aa02", "aa03"] {
            #expect((record.sends["x/\(token)"] ?? []) == Array(0..<10))
        }
    }

    @Test(
        "a broadcast route's line is its key and its channel: coalescing never replaces one channel's update by another's"
    )
    func broadcastLinesArePerChannel() async throws {
        let channels = ["Y2hhbm5lbEE=", "Y2hhbm5lbEI="]
        let count = 40
        let events = (0..<count).map { offset in
            SourceEvent(
                source: SourceCoordinates(topic: "in", partition: 0, offset: Int64(offset), key: nil),
                value: Array(#"{"activity":"m1","seq":\#(offset),"channel":"\#(channels[offset % 2])"}"#.utf8),
                headers: [], timestampMilliseconds: nil, assignmentGeneration: 1)
        }
        let route = RouteSpec(
            name: "live", inputTopic: "in", deviceTokens: "", topic: "com.example", pushType: "liveactivity",
            payload: .object([(key: "aps", value: .object([(key: "content-state", value: .object([]))]))]),
            channelID: "{{channel}}", orderingKey: "{{activity}}", coalesce: true)
        let harness = Harness(
            events: events, configuration: PipelineConfiguration(maxInFlight: 1000),
            mapper: RouterMapper(router: try Router(routes: [route])), sender: LineRecordingSender(latency: 20...20))
        try await harness.runToEnd()
        let outcomes = harness.sink.values(topic: "pushbridge.outcomes")
        #expect(outcomes.count == count)
        let offsetOf: ([String: Any]) -> Int = { (($0["source"] as? [String: Any])?["offset"] as? Int) ?? -1 }
        let byID = Dictionary(uniqueKeysWithValues: outcomes.map { ($0["notification_id"] as? String ?? "", $0) })
        for outcome in outcomes {
            #expect(outcome["schema"] as? String == "pushbridge.outcome.v2")
            let channel = try #require(outcome["channel_id"] as? String)
            #expect(channel == channels[offsetOf(outcome) % 2])
            if let replacement = outcome["superseded_by"] as? String {
                let newer = try #require(byID[replacement])
                #expect(newer["channel_id"] as? String == channel, "one channel's update replaced another's")
            }
        }
        // The newest update of each channel is delivered, whatever the other channel did meanwhile.
        for offset in [count - 2, count - 1] {
            #expect(outcomes.first { offsetOf($0) == offset }?["status"] as? String == "delivered", "offset \(offset)")
        }
        #expect(
            outcomes.contains { $0["status"] as? String == "superseded" }, "nothing coalesced: the test proves nothing")
    }

    @Test(
        "coalesce: a backlog for one key becomes few sends; each notification has one outcome; the newest is delivered")
    func coalescing() async throws {
        let count = 60
        let events = (0..<count).map { Self.event(offset: Int64($0), activity: "game-1") }
        let sender = LineRecordingSender(latency: 20...20)
        let registry = PrometheusCollectorRegistry()
        let harness = Harness(
            events: events, configuration: PipelineConfiguration(maxInFlight: 1000),
            mapper: try self.mapper(coalesce: true),
            sender: sender, metrics: BridgeMetrics(factory: PrometheusMetricsFactory(registry: registry)))
        try await harness.runToEnd()
        let outcomes = harness.sink.values(topic: "pushbridge.outcomes")
        #expect(outcomes.count == count)
        let byOffset = Dictionary(
            uniqueKeysWithValues: outcomes.map { (($0["source"] as? [String: Any])?["offset"] as? Int ?? -1, $0) })
        #expect(byOffset.count == count, "a notification had no outcome, or two")
        let sends = sender.record.sends["game-1"] ?? []
        #expect(sends.count < count / 5, "coalescing sent \(sends.count) of \(count)")
        #expect(sends.last == count - 1, "the newest must be sent")
        #expect(byOffset[count - 1]?["status"] as? String == "delivered")
        let ids = Dictionary(uniqueKeysWithValues: outcomes.map { ($0["notification_id"] as? String ?? "", $0) })
        for (offset, outcome) in byOffset {
            let status = outcome["status"] as? String
            #expect(status == "delivered" || status == "superseded")
            if status == "superseded" {
                #expect(outcome["schema"] as? String == "pushbridge.outcome.v2")
                #expect(outcome["attempts"] as? Int == 0)
                let replacement = try #require(outcome["superseded_by"] as? String)
                let newer = try #require(ids[replacement], "superseded_by names no notification")
                #expect((newer["source"] as? [String: Any])?["offset"] as? Int ?? -1 > offset)
                #expect(!sends.contains(offset), "a superseded notification was sent")
            } else {
                #expect(sends.contains(offset))
                #expect(outcome["schema"] as? String == "pushbridge.outcome.v1")
            }
        }
        let superseded = outcomes.filter { $0["status"] as? String == "superseded" }.count
        #expect(superseded == count - sends.count)
        let exposition = String(decoding: registry.emitToBuffer(), as: UTF8.self)
        #expect(
            exposition.contains(
                #"pushbridge_notifications_total{route="live",status="superseded",reason=""} \#(superseded)"#),
            "\(exposition)")
        #expect(harness.pipeline.inFlight == 0)
        #expect(harness.source.committed[PartitionID(topic: "in", partition: 0)] == Int64(count))
    }
}

/// A sender that records, per ordering line (the payload's `activity`, with the device token when
/// `keyIncludesToken`), the sequence numbers it was asked to send and whether two were in flight at once.
private final class LineRecordingSender: SimulatedAPNs {
    struct Record {
        var sends: [String: [Int]] = [:]
        var inFlight: [String: Int] = [:]
        var overlaps: [String] = []
        var current = 0
        var highestConcurrency = 0
        var retries = 0
        var systemicAnswers = 0
        var attempted: Set<String> = []
    }

    let latency: ClosedRange<Int>
    let retryableFirstAttempt: @Sendable (Int) -> Bool
    let systemicCalls: Int
    let keyIncludesToken: Bool
    /// When given, the send of sequence number 0 is answered only once it is set.
    let holdFirst: Flag?
    private let state = Mutex(Record())

    init(
        latency: ClosedRange<Int>, retryableFirstAttempt: @escaping @Sendable (Int) -> Bool = { _ in false },
        systemicCalls: Int = 0, keyIncludesToken: Bool = false, holdFirst: Flag? = nil
    ) {
        self.latency = latency
        self.retryableFirstAttempt = retryableFirstAttempt
        self.systemicCalls = systemicCalls
        self.keyIncludesToken = keyIncludesToken
        self.holdFirst = holdFirst
    }

    var record: Record { self.state.withLock { $0 } }

    func answer(_ notification: APNSCore.Notification, app: String?) async -> APNSResult {
        let object = (try? JSONSerialization.jsonObject(with: Data(notification.payload))) as? [String: Any] ?? [:]
        let activity = object["activity"] as? String ?? "?"
        let seq = Int(object["seq"] as? String ?? "") ?? (object["seq"] as? Int ?? -1)
        let line = self.keyIncludesToken ? "\(activity)/\(notification.deviceToken)" : activity
        let answer = self.state.withLock { state -> APNSResult? in
            state.sends[line, default: []].append(seq)
            state.inFlight[line, default: 0] += 1
            if state.inFlight[line]! > 1 { state.overlaps.append("\(line) #\(seq)") }
            state.current += 1
            state.highestConcurrency = max(state.highestConcurrency, state.current)
            if state.systemicAnswers < self.systemicCalls {
                state.systemicAnswers += 1
                return .answered(
                    APNSResponse(status: 403, reason: .invalidProviderToken, invalidSinceEpochMilliseconds: nil))
            }
            let first = state.attempted.insert(notification.apnsID).inserted
            if first && self.retryableFirstAttempt(seq) {
                state.retries += 1
                return .answered(
                    APNSResponse(status: 503, reason: .serviceUnavailable, invalidSinceEpochMilliseconds: nil))
            }
            return nil
        }
        try? await Task.sleep(for: .milliseconds(Int.random(in: self.latency)))
        if seq == 0, let hold = self.holdFirst {
            while !hold.isSet { try? await Task.sleep(for: .milliseconds(2)) }
        }
        self.state.withLock { state in
            state.inFlight[line, default: 1] -= 1
            state.current -= 1
        }
        return answer ?? .answered(APNSResponse(status: 200, reason: nil, invalidSinceEpochMilliseconds: nil))
    }
}

extension Array where Element: Equatable {
    /// The array with runs of equal neighbours reduced to one (a retried send appears once).
    fileprivate var deduplicatedRuns: [Element] {
        var result: [Element] = []
        for element in self where result.last != element { result.append(element) }
        return result
    }
}

// MARK: Reloading (docs/configuration.md, "Reloading")

extension PipelineTests {
    /// ``TokensMapper`` with its route renamed: which mapper made an outcome shows in its `route`.
    private struct RenamedRouteMapper: EventMapper {
        let route: String
        func map(_ event: SourceEvent) -> [RouteMapping] {
            TokensMapper(expiration: nil).map(event).map {
                RouteMapping(route: self.route, app: $0.app, outcome: $0.outcome)
            }
        }
    }

    @Test("a reload replaces the routes and the retry policy for the events taken after it, without a restart")
    func reloadAppliesToLaterEvents() async throws {
        let harness = Harness(
            events: [TestEvent.json(offset: 0, #"{"tokens":["aa01"]}"#)],
            configuration: PipelineConfiguration(
                maxAttempts: 1, retryBackoff: Backoff(initial: .milliseconds(1), maximum: .milliseconds(2))),
            mapper: RenamedRouteMapper(route: "before"),
            sender: ScriptedSender { _ in
                .answered(APNSResponse(status: 503, reason: .serviceUnavailable, invalidSinceEpochMilliseconds: nil))
            })
        let partition = PartitionID(topic: "in", partition: 0)
        let run = Task { try await harness.pipeline.run() }
        try await harness.source.waitFor(committed: 1, of: partition)
        try await harness.drained()
        harness.pipeline.reload(
            Pipeline.LiveSettings(
                mapper: RenamedRouteMapper(route: "after"), maxAttempts: 3,
                retryBackoff: Backoff(initial: .milliseconds(1), maximum: .milliseconds(2))))
        harness.source.deliver([TestEvent.json(offset: 1, #"{"tokens":["bb02"]}"#)])
        try await harness.source.waitFor(committed: 2, of: partition)
        try await harness.drained()
        harness.source.finish()
        try await run.value
        let outcomes = harness.sink.values(topic: "pushbridge.outcomes")
        let before = try #require(outcomes.first { $0["device_token"] as? String == "aa01" })
        let after = try #require(outcomes.first { $0["device_token"] as? String == "bb02" })
        #expect(before["route"] as? String == "before" && before["attempts"] as? Int == 1)
        #expect(after["route"] as? String == "after" && after["attempts"] as? Int == 3)
        #expect(outcomes.count == 2)
    }
}
