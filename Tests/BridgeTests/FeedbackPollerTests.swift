import APNSClient
import APNSSimulator
import BinaryProvider
import Foundation
import Kafka
import Logging
import PipelineTestSupport
import Prometheus
import ServiceLifecycle
import TestSupport
import TestWaiting
import Testing

@testable import Bridge
@testable import BridgeCore

/// The feedback poller against the simulator's feedback service over TLS with a client certificate, publishing
/// through the Kafka producer to librdkafka's mock cluster.
@Suite("Feedback poller", .timeLimit(.minutes(2)))
struct FeedbackPollerTests {
    /// A poller of `port` publishing to `world`'s invalid-token topic, with its metrics in `registry`.
    func poller(
        _ world: EndToEnd, port: Int, producer: KafkaProducer, registry: PrometheusCollectorRegistry,
        app: String = "legacy", interval: Duration = .seconds(3600), timeout: Duration = .seconds(5)
    ) throws -> FeedbackPoller {
        var configuration = FeedbackClientConfiguration(
            host: "127.0.0.1", port: port,
            credentials: CertificateCredentials(
                certificateChain: try world.tls.clientCertificateChain(), privateKey: try world.tls.clientPrivateKey()))
        configuration.additionalTrustRootsPEMFile = world.tls.caCertificatePath
        configuration.timeout = timeout
        return FeedbackPoller(
            app: app, client: try FeedbackClient(configuration: configuration), apnsTopic: "com.example.app",
            interval: interval, sink: KafkaRecordSink(producer: producer), invalidTokensTopic: world.topics[1],
            metrics: BridgeMetrics(factory: BridgeMetrics.prometheusFactory(registry: registry)),
            logger: quietLogger())
    }

    func producer(_ world: EndToEnd) throws -> KafkaProducer {
        var configuration = KafkaProducerConfiguration(bootstrapServers: world.broker.bootstrapServers)
        configuration.properties = ["log_level": "0"]
        return try KafkaProducer(configuration: configuration, logger: quietLogger()).running()
    }

    @Test("one v2 invalid-token record per 32-byte token, acknowledged by Kafka; a token of another size is skipped")
    func pollPublishes() async throws {
        try await withEndToEnd { world in
            let tokens = [EndToEnd.token(0xA1), EndToEnd.token(0xB2)]
            var behaviour = BinaryGatewayBehaviour()
            behaviour.feedbackTokens = [
                FeedbackTuple(timeEpochSeconds: 1_700_000_000, token: Self.bytes(tokens[0])),
                FeedbackTuple(timeEpochSeconds: 1_700_000_001, token: [1, 2, 3, 4]),
                FeedbackTuple(timeEpochSeconds: 1_700_000_002, token: Self.bytes(tokens[1])),
            ]
            let (gateway, service) = try await world.tls.startBinarySimulator(behaviour)
            let producer = try self.producer(world)
            let registry = PrometheusCollectorRegistry()
            let poller = try self.poller(world, port: service.port, producer: producer, registry: registry)

            let summary = await poller.pollOnce()
            #expect(summary.read == 3)
            #expect(summary.skipped == 1)
            #expect(summary.published == 2, "counted once Kafka acknowledged them")
            #expect(summary.end == .closed)
            let again = await poller.pollOnce()
            #expect(again.read == 0, "the service reports each token once")

            let results = try await world.results { $0.invalidTokens.count >= 2 }
            #expect(results.invalidTokens.count == 2)
            #expect(results.invalidTokens.map { $0["device_token"] } == tokens)
            let first = try #require(results.invalidTokens.first)
            #expect(first["schema"] == "pushbridge.invalid-token.v2")
            #expect(first["apns_topic"] == "com.example.app")
            #expect(first["reason"] == "Unregistered")
            #expect(first["invalid_since"] == "2023-11-14T22:13:20.000Z")
            #expect(first["notification_id"] == nil && first["route"] == nil && first["source"] == nil)
            let message = try #require(results.invalidTokenMessages.first)
            #expect(message.key == Array(tokens[0].utf8))
            #expect(
                message.headers.map { "\($0.name)=\(String(decoding: $0.value ?? [], as: UTF8.self))" }
                    == ["pushbridge-protocol=binary"])
            let report = try await RecordSchemas.validate(results.invalidTokenValues.map { (.invalidTokenV2, $0) })
            #expect(report.problems == [])

            let metrics = registry.emitToBuffer()
            let text = String(decoding: metrics, as: UTF8.self)
            #expect(metricSum(text, #"pushbridge_feedback_tokens_total{app="legacy"}"#) == 2)
            #expect(metricSum(text, #"pushbridge_feedback_tokens_skipped_total{app="legacy"}"#) == 1)
            #expect(metricSum(text, #"pushbridge_invalid_tokens_total{reason="Unregistered"}"#) == 2)
            await producer.close()
            await service.close()
            await gateway.close()
        }
    }

    @Test("records Kafka fails are published again until acknowledged; the poll counts them only then")
    func kafkaFailuresAreRetried() async throws {
        try await withEndToEnd { world in
            var behaviour = BinaryGatewayBehaviour()
            behaviour.feedbackTokens = [
                FeedbackTuple(timeEpochSeconds: 1_700_000_000, token: Self.bytes(EndToEnd.token(0xC3)))
            ]
            let (gateway, service) = try await world.tls.startBinarySimulator(behaviour)
            var configuration = KafkaProducerConfiguration(bootstrapServers: world.broker.bootstrapServers)
            // Deliveries fail fast while the broker is down, so the poller's own retry is what gets the record through.
            configuration.properties = ["log_level": "0", "message.timeout.ms": "300"]
            let producer = try KafkaProducer(configuration: configuration, logger: quietLogger()).running()
            let registry = PrometheusCollectorRegistry()
            let poller = try self.poller(world, port: service.port, producer: producer, registry: registry)
            try world.cluster.setBrokerDown(1)
            let poll = Task { await poller.pollOnce() }
            let failures: @Sendable () -> Double = {
                metricSum(
                    String(decoding: registry.emitToBuffer(), as: UTF8.self), "pushbridge_feedback_poll_failures_total")
            }
            try await waitUntil(timeout: .seconds(20)) { failures() >= 1 }
            try world.cluster.setBrokerUp(1)
            let summary = await poll.value
            #expect(summary.published == 1)
            let results = try await world.results { $0.invalidTokens.count >= 1 }
            #expect(results.invalidTokens.map { $0["device_token"] } == [EndToEnd.token(0xC3)])
            await producer.close()
            await service.close()
            await gateway.close()
        }
    }

    /// Runs `poller` in a service group until `until` holds, then shuts the group down gracefully; returns how long
    /// the shutdown took.
    func runThenShutDown(_ poller: FeedbackPoller, until: @escaping @Sendable () -> Bool) async throws -> Duration {
        let group = ServiceGroup(
            configuration: ServiceGroupConfiguration(
                services: [.init(service: FeedbackPollers([poller]))], gracefulShutdownSignals: [],
                cancellationSignals: [],
                logger: quietLogger()))
        let run = Task { try await group.run() }
        try await waitUntil(timeout: .seconds(30), until)
        let stopping = ContinuousClock.now
        await group.triggerGracefulShutdown()
        try await run.value
        return ContinuousClock.now - stopping
    }

    static func failures(_ registry: PrometheusCollectorRegistry) -> Double {
        metricSum(String(decoding: registry.emitToBuffer(), as: UTF8.self), "pushbridge_feedback_poll_failures_total")
    }

    @Test("a service that cannot be reached is counted and polled again every interval")
    func unreachableServiceIsRetried() async throws {
        try await withEndToEnd { world in
            let refusing = try RefusingPort()
            let port = refusing.port
            let producer = try self.producer(world)
            let registry = PrometheusCollectorRegistry()
            let poller = try self.poller(
                world, port: port, producer: producer, registry: registry, app: "down", interval: .seconds(1))
            _ = try await self.runThenShutDown(poller) { Self.failures(registry) >= 3 }
            #expect(Self.failures(registry) >= 3)
            await producer.close()
            withExtendedLifetime(refusing) {}
        }
    }

    @Test("shutdown stops the poller at once, while it waits for the next interval or for a service that never closes")
    func shutdownIsImmediate() async throws {
        try await withEndToEnd { world in
            let producer = try self.producer(world)
            // Waiting for the next interval (an hour) after a failed poll.
            let (gateway, service) = try await world.tls.startBinarySimulator()
            let closedPort = service.port
            await service.close()
            await gateway.close()
            let registry = PrometheusCollectorRegistry()
            let sleeping = try self.poller(world, port: closedPort, producer: producer, registry: registry)
            let afterSleep = try await self.runThenShutDown(sleeping) { Self.failures(registry) >= 1 }
            // Tells a prompt stop from one that waits for the hour-long interval; it took 2.8 s under the parallel
            // suite on an unloaded 2-core host.
            #expect(afterSleep < .seconds(30), "the poller does not wait for its interval to stop")
            // In the middle of a poll of a service that never sends nor closes (the poll's timeout is a minute).
            let silent = try await HostileFeedbackServer.start(tls: world.tls, behaviour: .silent)
            let stuck = try self.poller(
                world, port: silent.port, producer: producer, registry: PrometheusCollectorRegistry(),
                timeout: .seconds(60)
            )
            let started = ContinuousClock.now
            let afterRead = try await self.runThenShutDown(stuck) { ContinuousClock.now - started > .seconds(1) }
            // Tells an abandoned poll from one that runs out its 60 s timeout: halfway.
            #expect(afterRead < .seconds(30), "a poll in progress is abandoned")
            await silent.shutdown()
            await producer.close()
        }
    }

    static func bytes(_ hex: String) -> [UInt8] {
        let digits = Array(hex.utf8)
        return stride(from: 0, to: digits.count, by: 2).map {
            UInt8(String(decoding: digits[$0..<$0 + 2], as: UTF8.self), radix: 16) ?? 0
        }
    }
}
