import Bridge
import BridgeCore
import CoreMetrics
import Foundation
import Logging
import NIOCore
import NIOPosix
import PipelineTestSupport
import Prometheus
import Synchronization
import TestWaiting
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

@Suite("Admin server")
struct AdminServerTests {
    /// Runs an admin server on a free loopback port for the duration of `body`.
    func withServer(
        registry: PrometheusCollectorRegistry = PrometheusCollectorRegistry(),
        readiness: @escaping @Sendable () -> Readiness = { .ready },
        laneReadiness: @escaping @Sendable (String) -> Readiness? = { _ in nil },
        limits: AdminServer.Limits = AdminServer.Limits(),
        _ body: @Sendable (Int) async throws -> Void
    ) async throws {
        let (ports, continuation) = AsyncStream<Int>.makeStream()
        let server = AdminServer(
            host: "127.0.0.1", port: 0,
            metrics: { registry.emitToBuffer() },
            readiness: readiness,
            laneReadiness: laneReadiness,
            onBound: { continuation.yield($0) },
            limits: limits,
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

    @Test("/metrics serves the metric names of docs/operations.md in Prometheus text")
    func metricsNames() async throws {
        let registry = PrometheusCollectorRegistry()
        let metrics = BridgeMetrics(factory: BridgeMetrics.prometheusFactory(registry: registry))
        metrics.eventsConsumed(topic: "orders", count: 3)
        metrics.eventUnmatched(topic: "orders")
        metrics.notification(route: "shipped", status: .rejected, reason: "Unregistered")
        metrics.deadLetter(route: "shipped")
        metrics.invalidToken(reason: "Unregistered")
        metrics.consumerLag(topic: "orders", partition: 2, lag: 42)
        metrics.apnsRequestDuration.recordMilliseconds(12)
        metrics.inFlight.record(7)
        metrics.inFlightBytes.record(7168)
        metrics.unpublishedRecords.record(1)
        metrics.orderingMaxWaiting.record(12)
        metrics.inFlightGauges(lane: "urgent").count.record(3)
        metrics.inFlightGauges(lane: "urgent").bytes.record(3072)
        metrics.heldBackPartitions(lane: "default", count: 2)
        metrics.oldestUnfinished(topic: "orders", partition: 2, age: .milliseconds(1500))
        metrics.notification(route: "shipped", status: .rejected, reason: "MadeUpByTheServer\u{1}")
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
                // The buckets docs/operations.md promises (1 ms … 10 s), not swift-prometheus's defaults.
                #"pushbridge_apns_request_duration_seconds_bucket{le="0.001"} 0"#,
                #"pushbridge_apns_request_duration_seconds_bucket{le="0.025"} 1"#,
                #"pushbridge_apns_request_duration_seconds_bucket{le="10.0"} 1"#,
                #"pushbridge_in_flight{lane="default"} 7"#,
                #"pushbridge_in_flight_bytes{lane="default"} 7168"#,
                #"pushbridge_in_flight{lane="urgent"} 3"#,
                #"pushbridge_in_flight_bytes{lane="urgent"} 3072"#,
                #"pushbridge_lane_held_back_partitions{lane="default"} 2"#,
                "pushbridge_unpublished_records 1",
                #"pushbridge_oldest_unfinished_seconds{topic="orders",partition="2"} 1.5"#,
                #"pushbridge_notifications_total{route="shipped",status="rejected",reason="Unknown"} 1"#,
                "pushbridge_halted 0",
                "pushbridge_apns_connections 0",
                "pushbridge_ordering_max_waiting 12",
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

    @Test("/readyz?lane=NAME answers the lane's readiness, 404 for a lane that does not exist")
    func laneReadiness() async throws {
        let lanes: @Sendable (String) -> Readiness? = { lane in
            switch lane {
            case "bulk":
                .notReady("lane bulk: full (10 of 10 in flight, 1024 of 1024 bytes) and nothing of it finished for 1 s")
            case "urgent": .ready
            default: nil
            }
        }
        try await self.withServer(readiness: { .ready }, laneReadiness: lanes) { port in
            let (bulk, body) = try await self.get(port, "/readyz?lane=bulk")
            #expect(bulk == 503)
            #expect(body.contains(#""reason":"lane bulk: full (10 of 10 in flight"#), "\(body)")
            #expect(try await self.get(port, "/readyz?lane=urgent").0 == 200)
            #expect(try await self.get(port, "/readyz?other=1&lane=urgent").0 == 200)
            let (unknown, unknownBody) = try await self.get(port, "/readyz?lane=nonesuch")
            #expect(unknown == 404)
            #expect(unknownBody.contains(#""status":"unknown_lane""#), "\(unknownBody)")
            #expect(try await self.get(port, "/readyz").0 == 200, "without lane= the instance answers")
        }
    }

    // MARK: Hostile clients

    @Test func halfSentRequestsAreClosedAfterTheRequestTimeout() async throws {
        let limits = AdminServer.Limits(requestTimeout: .milliseconds(500), idleTimeout: .seconds(60))
        try await self.withServer(limits: limits) { port in
            var connections: [RawConnection] = []
            for _ in 0..<20 {
                let connection = try await RawConnection.open(port: port)
                connection.send("GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
                connections.append(connection)
            }
            let silent = try await RawConnection.open(port: port)
            // Bounded by the suite's time limit; each close is the server's (the client never closes).
            for connection in connections + [silent] {
                try await connection.waitUntilClosed(within: .seconds(20))
            }
            #expect(connections.allSatisfy { $0.received.isEmpty }, "half requests get no answer, only a close")
            let (status, _) = try await self.get(port, "/healthz")
            #expect(status == 200)
        }
    }

    @Test func connectionsBeyondTheLimitAreClosedAtOnce() async throws {
        // The request timeout is long, so only the connection limit can close anything here.
        let limits = AdminServer.Limits(requestTimeout: .seconds(60), maxConnections: 10)
        try await self.withServer(limits: limits) { port in
            var connections: [RawConnection] = []
            for _ in 0..<300 {
                let connection = try await RawConnection.open(port: port)
                connection.send("GET /readyz HTTP/1.1\r\n")
                connections.append(connection)
            }
            _ = try await eventually(timeout: .seconds(20), every: .milliseconds(20)) {
                connections.filter(\.isClosed).count >= 290
            }
            #expect(connections.filter(\.isClosed).count == 290, "all but 10 are closed")
            #expect(connections.filter { !$0.isClosed }.count == 10, "10 are within the limit and stay open")
            for connection in connections { connection.close() }
            // Once the half-open ones are gone, the server answers again.
            let answered = try await eventually(timeout: .seconds(20), every: .milliseconds(20)) {
                (try? await self.get(port, "/healthz"))?.0 == 200
            }
            #expect(answered)
        }
    }

    @Test func oversizedRequestIsAnswered431AndClosed() async throws {
        let limits = AdminServer.Limits(maxRequestBytes: 1024)
        try await self.withServer(limits: limits) { port in
            let connection = try await RawConnection.open(port: port)
            connection.send("GET /metrics HTTP/1.1\r\nHost: x\r\nX-Big: \(String(repeating: "a", count: 4096))\r\n\r\n")
            try await connection.waitUntilClosed(within: .seconds(20))
            #expect(connection.receivedText.hasPrefix("HTTP/1.1 431 "))
        }
    }

    @Test func idleKeepAliveConnectionIsClosedAfterTheIdleTimeout() async throws {
        let limits = AdminServer.Limits(idleTimeout: .milliseconds(300))
        try await self.withServer(limits: limits) { port in
            let connection = try await RawConnection.open(port: port)
            connection.send("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            try await connection.waitUntilClosed(within: .seconds(20))
            #expect(connection.receivedText.hasPrefix("HTTP/1.1 200 OK"), "answered first, closed when idle")
            #expect(connection.receivedText.contains(#"{"status":"alive"}"#))
        }
    }

    @Test func keepAliveConnectionServesSeveralRequestsWithinTheBounds() async throws {
        try await self.withServer(limits: AdminServer.Limits(maxRequestBytes: 1024)) { port in
            let connection = try await RawConnection.open(port: port)
            for _ in 0..<5 {
                // Each request is under the bound, all five together are not: the bound is per request.
                connection.send(
                    "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Pad: \(String(repeating: "p", count: 400))\r\n\r\n")
                let answered = try await eventually(timeout: .seconds(20), every: .milliseconds(20)) {
                    connection.receivedText.components(separatedBy: "HTTP/1.1 200").count > 1
                }
                #expect(answered)
                connection.clearReceived()
            }
            #expect(!connection.isClosed)
            connection.close()
        }
    }
}

/// A plain TCP client on 127.0.0.1 that writes raw bytes and records what comes back and when the server closes.
final class RawConnection: Sendable {
    private let channel: any Channel
    private let state: RawState

    private init(channel: any Channel, state: RawState) {
        self.channel = channel
        self.state = state
    }

    static func open(port: Int) async throws -> RawConnection {
        let state = RawState()
        let channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(RawRecorder(state: state))
                }
            }
            .connect(host: "127.0.0.1", port: port)
            .get()
        return RawConnection(channel: channel, state: state)
    }

    func send(_ text: String) {
        self.channel.writeAndFlush(self.channel.allocator.buffer(string: text), promise: nil)
    }

    var received: [UInt8] { self.state.bytes.withLock { $0 } }
    var receivedText: String { String(decoding: self.received, as: UTF8.self) }
    func clearReceived() { self.state.bytes.withLock { $0.removeAll() } }
    var isClosed: Bool { self.state.closed.withLock { $0 } }

    func close() {
        self.channel.close(promise: nil)
    }

    /// Waits until the server closed the connection; throws when it did not within `timeout`.
    func waitUntilClosed(within timeout: Duration) async throws {
        let deadline = ContinuousClock.now + timeout
        while !self.isClosed {
            guard ContinuousClock.now < deadline else {
                Issue.record("the server did not close the connection within \(timeout)")
                return
            }
            try await Task.sleep(for: .milliseconds(20))
        }
    }
}

final class RawState: Sendable {
    let bytes = Mutex<[UInt8]>([])
    let closed = Mutex(false)
}

private final class RawRecorder: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    let state: RawState

    init(state: RawState) {
        self.state = state
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let buffer = self.unwrapInboundIn(data)
        self.state.bytes.withLock { $0 += Array(buffer.readableBytesView) }
    }

    func channelInactive(context: ChannelHandlerContext) {
        self.state.closed.withLock { $0 = true }
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
    }
}
