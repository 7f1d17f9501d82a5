import Bridge
import Foundation
import Logging
import Prometheus
import Synchronization
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

@Suite("Admin server")
struct AdminServerTests {
    /// Runs an admin server on a free loopback port for the duration of `body`.
    func withServer(
        registry: PrometheusCollectorRegistry,
        readiness: @escaping @Sendable () -> Readiness,
        _ body: @Sendable (Int) async throws -> Void
    ) async throws {
        let (ports, continuation) = AsyncStream<Int>.makeStream()
        let server = AdminServer(
            host: "127.0.0.1", port: 0,
            metrics: { registry.emitToBuffer() },
            readiness: readiness,
            onBound: { continuation.yield($0) },
            logger: Logger(label: "test")
        )
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await server.run() }
            var iterator = ports.makeAsyncIterator()
            let port = try #require(await iterator.next())
            try await body(port)
            group.cancelAll()
        }
    }

    func get(_ port: Int, _ path: String) async throws -> (Int, String) {
        let url = URL(string: "http://127.0.0.1:\(port)\(path)")!
        let (data, response) = try await URLSession.shared.data(from: url)
        return ((response as? HTTPURLResponse)?.statusCode ?? 0, String(decoding: data, as: UTF8.self))
    }

    @Test("/metrics serves the SPEC §5 metric names in Prometheus text")
    func metricsNames() async throws {
        let registry = PrometheusCollectorRegistry()
        let metrics = BridgeMetrics(factory: PrometheusMetricsFactory(registry: registry))
        metrics.eventsConsumed(topic: "orders", count: 3)
        metrics.eventUnmatched(topic: "orders")
        metrics.notification(route: "shipped", status: .rejected, reason: "Unregistered")
        metrics.deadLetter(route: "shipped")
        metrics.invalidToken(reason: "Unregistered")
        metrics.consumerLag(topic: "orders", partition: 2, lag: 42)
        metrics.apnsRequestDuration.recordMilliseconds(12)
        metrics.inFlight.record(7)
        try await self.withServer(registry: registry, readiness: { .ready }) { port in
            let (status, text) = try await self.get(port, "/metrics")
            #expect(status == 200)
            for expected in [
                #"pushbridge_events_consumed_total{topic="orders"} 3"#,
                #"pushbridge_events_unmatched_total{topic="orders"} 1"#,
                #"pushbridge_notifications_total{route="shipped",status="rejected",reason="Unregistered"} 1"#,
                #"pushbridge_dead_letters_total{route="shipped"} 1"#,
                #"pushbridge_invalid_tokens_total{reason="Unregistered"} 1"#,
                #"pushbridge_consumer_lag{topic="orders",partition="2"} 42"#,
                "pushbridge_apns_request_duration_seconds_count 1",
                "pushbridge_in_flight 7",
                "pushbridge_halted 0",
                "pushbridge_apns_connections 0",
            ] {
                #expect(text.contains(expected), "missing \(expected) in:\n\(text)")
            }
        }
    }

    @Test("/readyz answers 503 with the reason while not ready, then 200")
    func readiness() async throws {
        let state = Mutex(Readiness.notReady("halted: InvalidProviderToken (app default)"))
        try await self.withServer(registry: PrometheusCollectorRegistry(), readiness: { state.withLock { $0 } }) {
            port in
            let (status, body) = try await self.get(port, "/readyz")
            #expect(status == 503)
            #expect(body.contains(#""reason":"halted: InvalidProviderToken (app default)""#))
            state.withLock { $0 = .ready }
            let (readyStatus, _) = try await self.get(port, "/readyz")
            #expect(readyStatus == 200)
            let (healthStatus, _) = try await self.get(port, "/healthz")
            #expect(healthStatus == 200)
            let (missingStatus, _) = try await self.get(port, "/nope")
            #expect(missingStatus == 404)
        }
    }
}
