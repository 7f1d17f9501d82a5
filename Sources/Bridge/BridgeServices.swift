import APNSCore
import BridgeCore
import Configuration
import CoreMetrics
import Kafka
import Logging
import Prometheus
import Routing
import ServiceLifecycle
import Synchronization
import UnixSignals
import Waiting

// The services BridgeRuntime runs beside the pipeline, the sender and the admin server (docs/architecture.md).

/// Runs the producer (its delivery reports), and closes it after everything before it in the group stopped: it
/// flushes last, at most ``ShutdownSteps/producerClose``, and fails what is left.
struct ProducerService: Service {
    let producer: KafkaProducer

    func run() async throws {
        await withDiscardingTaskGroup { group in
            group.addTask { await self.producer.run() }
            try? await gracefulShutdown()
            await self.producer.close(timeout: ShutdownSteps.producerClose)
        }
    }
}

/// What a shutdown may take past `shutdown.drain_timeout`: each step after the drain has its own bound, whatever
/// Kafka and APNs do, and together they are the margin within which SIGTERM ends the process
/// (docs/operations.md, "Shutdown"). A watchdog ends the process there should anything else hold it up.
package enum ShutdownSteps {
    /// The sink's flush after the drain (records of abandoned work).
    package static let flush: Duration = .seconds(2)
    /// The final commit (and each periodic one): librdkafka's own waits up to `socket.timeout.ms` for a
    /// coordinator.
    package static let commit: Duration = .seconds(2)
    /// The consumer's close: revocation, the synchronous commit of what was stored, leaving the group.
    package static let consumerClose: Duration = .seconds(3)
    /// The producer's flush before it fails what is left.
    package static let producerClose: Duration = .seconds(3)
    /// All of them: 10 s.
    package static var margin: Duration { flush + commit + consumerClose + producerClose }
}

/// Notes when the shutdown began: the last service of the group, so the first the graceful shutdown reaches.
struct ShutdownClock: Service {
    let began: AsyncCondition<ContinuousClock.Instant?>

    func run() async throws {
        try? await gracefulShutdown()
        self.began.withLock { $0 = $0 ?? .now }
    }
}

/// Runs the sender, and closes its connections once the pipeline drained.
struct SenderService: Service {
    let sender: any ManagedSender

    func run() async throws {
        await withDiscardingTaskGroup { group in
            group.addTask { await self.sender.run() }
            try? await gracefulShutdown()
            await self.sender.shutdown()
        }
    }
}

/// Commits finished offsets every `kafka.commit_interval` while the bridge runs; the source commits once
/// more when it closes.
struct CommitService: Service {
    let source: any EventSource
    let interval: Duration

    func run() async throws {
        await cancelWhenGracefulShutdown {
            while !Task.isCancelled {
                try? await Task.sleep(for: self.interval)
                await self.source.commit()
            }
        }
    }
}

/// Updates the gauges that are read rather than counted: consumer lag, the age of each partition's oldest
/// unfinished event, records waiting to be published, the deepest per-key line, and open APNs connections.
struct GaugeReporter: Service {
    let source: any EventSource
    let pipeline: Pipeline
    let sender: any ManagedSender
    let metrics: BridgeMetrics
    var interval: Duration = .seconds(5)

    func run() async throws {
        await cancelWhenGracefulShutdown {
            await self.report()
        }
    }

    private func report() async {
        while !Task.isCancelled {
            for lag in await self.source.lag() {
                self.metrics.consumerLag(
                    topic: lag.partition.topic, partition: lag.partition.partition, lag: lag.uncommittedMessageCount
                )
            }
            for (partition, age) in self.pipeline.oldestUnfinished() {
                self.metrics.oldestUnfinished(topic: partition.topic, partition: partition.partition, age: age)
            }
            self.metrics.unpublishedRecords.record(self.pipeline.unpublished.count)
            self.metrics.orderingMaxWaiting.record(self.pipeline.deepestOrderingLine)
            for (lane, count) in self.pipeline.heldBackPartitionsByLane() {
                self.metrics.heldBackPartitions(lane: lane, count: count)
            }
            self.metrics.apnsConnections.record(self.sender.openConnections)
            try? await Task.sleep(for: self.interval)
        }
    }
}
