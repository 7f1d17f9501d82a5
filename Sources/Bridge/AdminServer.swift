import BridgeCore
import Logging
import NIOCore
import NIOHTTP1
import NIOPosix
import ServiceLifecycle
import Synchronization

/// The admin HTTP server (docs/operations.md): `GET /metrics` (Prometheus text), `GET /healthz` (the process is alive)
/// and `GET /readyz` (200 when ready, 503 with a JSON reason otherwise; `GET /readyz?lane=NAME` for one lane, 404 for
/// a lane that does not exist).
///
/// It is plain HTTP/1.1 on SwiftNIO: scrapers and kubelets speak nothing else, and three fixed routes need no
/// framework.
///
/// Clients are bounded (docs/operations.md, "The admin server"): a request must arrive complete within
/// ``Limits/requestTimeout`` of its first byte (or of the connection opening), a keep-alive connection idle for
/// ``Limits/idleTimeout`` is closed, a request larger than ``Limits/maxRequestBytes`` is answered 431 and its
/// connection closed, and connections beyond ``Limits/maxConnections`` are closed as soon as they are
/// accepted. So a client that opens connections and sends half a request cannot hold the port, nor memory.
package struct AdminServer: Service {
    /// The bounds on clients.
    package struct Limits: Sendable, Hashable {
        /// How long a request may take to arrive, from its first byte or from the connection opening.
        package var requestTimeout: Duration
        /// How long a keep-alive connection may stay open without a request.
        package var idleTimeout: Duration
        /// Connections open at once; more are closed on accept.
        package var maxConnections: Int
        /// The largest request (request line, headers and body) accepted.
        package var maxRequestBytes: Int

        /// The defaults: 5 s per request, 60 s idle, 64 connections, 16 KiB per request.
        package init(
            requestTimeout: Duration = .seconds(5),
            idleTimeout: Duration = .seconds(60),
            maxConnections: Int = 64,
            maxRequestBytes: Int = 16 * 1024
        ) {
            self.requestTimeout = requestTimeout
            self.idleTimeout = idleTimeout
            self.maxConnections = maxConnections
            self.maxRequestBytes = maxRequestBytes
        }
    }

    /// Where to listen.
    package var host: String
    /// The port; `0` picks a free one (see ``onBound``).
    package var port: Int
    /// Produces the Prometheus text exposition on each scrape.
    package var metrics: @Sendable () -> [UInt8]
    /// Answers each readiness probe.
    package var readiness: @Sendable () -> Readiness
    /// Answers each readiness probe of one lane (`/readyz?lane=NAME`); `nil` for a lane that does not exist.
    package var laneReadiness: @Sendable (String) -> Readiness?
    /// Answers each liveness probe (`/healthz`): not alive only when the process cannot recover by itself
    /// (a fatal Kafka producer error), so Kubernetes restarts it.
    package var liveness: @Sendable () -> Readiness
    /// Called once the socket is bound, with the actual port.
    package var onBound: @Sendable (Int) -> Void
    /// The bounds on clients.
    package var limits: Limits
    let logger: Logger

    /// Creates the server; nothing listens until ``run()``.
    package init(
        host: String,
        port: Int,
        metrics: @escaping @Sendable () -> [UInt8],
        readiness: @escaping @Sendable () -> Readiness,
        laneReadiness: @escaping @Sendable (String) -> Readiness? = { _ in nil },
        liveness: @escaping @Sendable () -> Readiness = { .ready },
        onBound: @escaping @Sendable (Int) -> Void = { _ in },
        limits: Limits = Limits(),
        logger: Logger
    ) {
        self.host = host
        self.port = port
        self.metrics = metrics
        self.readiness = readiness
        self.laneReadiness = laneReadiness
        self.liveness = liveness
        self.onBound = onBound
        self.limits = limits
        self.logger = logger
    }

    /// Listens until graceful shutdown or cancellation, then closes the socket.
    package func run() async throws {
        let metrics = self.metrics
        let readiness = self.readiness
        let laneReadiness = self.laneReadiness
        let liveness = self.liveness
        let limits = self.limits
        let logger = self.logger
        let openConnections = ConnectionCount()
        let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.backlog, value: 64)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                let open = openConnections.value.wrappingAdd(1, ordering: .relaxed).newValue
                channel.closeFuture.whenComplete { _ in openConnections.value.subtract(1, ordering: .relaxed) }
                guard open <= limits.maxConnections else {
                    // Over the limit: closed as soon as it is active, so half-open clients cannot pile up.
                    logger.debug("admin connection refused: too many open", metadata: ["admin.open": "\(open)"])
                    return channel.eventLoop.makeCompletedFuture {
                        try channel.pipeline.syncOperations.addHandler(CloseOnActive())
                    }
                }
                return channel.eventLoop.makeCompletedFuture {
                    let guardHandler = AdminConnectionGuard(limits: limits)
                    try channel.pipeline.syncOperations.addHandler(guardHandler)
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline(withErrorHandling: true)
                    try channel.pipeline.syncOperations.addHandler(
                        AdminHandler(
                            metrics: metrics, readiness: readiness, laneReadiness: laneReadiness, liveness: liveness,
                            connectionGuard: guardHandler)
                    )
                }
            }
            .bind(host: self.host, port: self.port)
            .get()
        let boundPort = channel.localAddress?.port ?? self.port
        self.logger.info(
            "admin server listening",
            metadata: ["admin.host": "\(self.host)", "admin.port": "\(boundPort)"]
        )
        self.onBound(boundPort)
        try? await gracefulShutdown()
        try? await channel.close()
    }
}

/// Answers the three admin routes on one HTTP/1.1 connection.
private final class AdminHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private let metrics: @Sendable () -> [UInt8]
    private let readiness: @Sendable () -> Readiness
    private let laneReadiness: @Sendable (String) -> Readiness?
    private let liveness: @Sendable () -> Readiness
    private let connectionGuard: AdminConnectionGuard
    private var head: HTTPRequestHead?

    init(
        metrics: @escaping @Sendable () -> [UInt8], readiness: @escaping @Sendable () -> Readiness,
        laneReadiness: @escaping @Sendable (String) -> Readiness?, liveness: @escaping @Sendable () -> Readiness,
        connectionGuard: AdminConnectionGuard
    ) {
        self.metrics = metrics
        self.readiness = readiness
        self.laneReadiness = laneReadiness
        self.liveness = liveness
        self.connectionGuard = connectionGuard
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch self.unwrapInboundIn(data) {
        case .head(let head):
            self.head = head
        case .body:
            break
        case .end:
            guard let head = self.head else { return }
            self.head = nil
            self.connectionGuard.requestFinished(channel: context.channel)
            self.respond(to: head, context: context)
        }
    }

    private func respond(to head: HTTPRequestHead, context: ChannelHandlerContext) {
        let path = head.uri.split(separator: "?", maxSplits: 1).first.map(String.init) ?? head.uri
        let status: HTTPResponseStatus
        let contentType: String
        let body: [UInt8]
        switch (head.method, path) {
        case (.GET, "/metrics"), (.HEAD, "/metrics"):
            status = .ok
            contentType = "text/plain; version=0.0.4; charset=utf-8"
            body = self.metrics()
        case (.GET, "/healthz"), (.HEAD, "/healthz"):
            let liveness = self.liveness()
            status = liveness.isReady ? .ok : .serviceUnavailable
            contentType = "application/json"
            body =
                liveness.isReady
                ? Array(#"{"status":"alive"}"#.utf8) : Self.statusBody("failed", reason: liveness.reason)
        case (.GET, "/readyz"), (.HEAD, "/readyz"):
            contentType = "application/json"
            let lane = Self.queryValue(of: "lane", in: head.uri)
            let readiness: Readiness? = if let lane { self.laneReadiness(lane) } else { self.readiness() }
            if let readiness {
                status = readiness.isReady ? .ok : .serviceUnavailable
                body = Self.statusBody(readiness.isReady ? "ready" : "not_ready", reason: readiness.reason)
            } else {
                status = .notFound
                body = Self.statusBody("unknown_lane", reason: "no lane named \(String((lane ?? "").prefix(64)))")
            }
        case (_, "/metrics"), (_, "/healthz"), (_, "/readyz"):
            status = .methodNotAllowed
            contentType = "text/plain"
            body = Array("method not allowed\n".utf8)
        default:
            status = .notFound
            contentType = "text/plain"
            body = Array("not found: try /metrics, /healthz or /readyz\n".utf8)
        }
        var headers = HTTPHeaders()
        headers.add(name: "content-type", value: contentType)
        headers.add(name: "content-length", value: String(body.count))
        let keepAlive = head.isKeepAlive
        if !keepAlive { headers.add(name: "connection", value: "close") }
        let responseHead = HTTPResponseHead(version: head.version, status: status, headers: headers)
        context.write(self.wrapOutboundOut(.head(responseHead)), promise: nil)
        if head.method != .HEAD {
            let buffer = context.channel.allocator.buffer(bytes: body)
            context.write(self.wrapOutboundOut(.body(.byteBuffer(buffer))), promise: nil)
        }
        let done = context.writeAndFlush(self.wrapOutboundOut(.end(nil)))
        if !keepAlive {
            let channel = context.channel
            done.whenComplete { _ in channel.close(promise: nil) }
        }
    }

    /// The value of `name` in the URI's query (`?lane=bulk`), as written (lane names need no decoding); the first
    /// one when given more than once.
    static func queryValue(of name: String, in uri: String) -> String? {
        guard let query = uri.split(separator: "?", maxSplits: 1).dropFirst().first else { return nil }
        for pair in query.split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            if parts.first == Substring(name) { return parts.count > 1 ? String(parts[1]) : "" }
        }
        return nil
    }

    private static func statusBody(_ status: String, reason: String?) -> [UInt8] {
        var json = JSONWriter(reservingCapacity: 128)
        json.beginObject()
        json.key("status")
        json.string(status)
        json.key("reason")
        json.string(reason)
        json.endObject()
        return json.bytes
    }
}

/// Open admin connections, counted across event loops.
private final class ConnectionCount: Sendable {
    let value = Atomic<Int>(0)
}

/// Closes a connection accepted beyond ``AdminServer/Limits/maxConnections``.
private final class CloseOnActive: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer

    func channelActive(context: ChannelHandlerContext) {
        context.close(promise: nil)
    }
}

/// The first handler of an admin connection: sees the raw bytes, and closes the connection when a request takes
/// longer than ``AdminServer/Limits/requestTimeout`` to arrive, grows past
/// ``AdminServer/Limits/maxRequestBytes`` (after a 431 answer), or the connection stays idle for
/// ``AdminServer/Limits/idleTimeout``.
///
/// `AdminHandler` tells it when a request is complete. Both run on the connection's event loop only.
final class AdminConnectionGuard: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer

    private let limits: AdminServer.Limits
    /// Bytes of the request in progress; `nil` between requests.
    private var requestBytes: Int?
    private var timer: Scheduled<Void>?
    private var rejected = false

    init(limits: AdminServer.Limits) {
        self.limits = limits
    }

    func channelActive(context: ChannelHandlerContext) {
        // A fresh connection has the request timeout to send its first request, not the idle timeout: a client
        // that connects and sends nothing is the cheapest way to hold a slot.
        self.requestBytes = 0
        self.schedule(self.limits.requestTimeout, channel: context.channel)
        context.fireChannelActive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.timer?.cancel()
        self.timer = nil
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !self.rejected else { return }
        let buffer = self.unwrapInboundIn(data)
        if self.requestBytes == nil {
            self.requestBytes = 0
            self.schedule(self.limits.requestTimeout, channel: context.channel)
        }
        let total = (self.requestBytes ?? 0) + buffer.readableBytes
        self.requestBytes = total
        guard total <= self.limits.maxRequestBytes else {
            // The request timer keeps running: it closes the connection even if the answer cannot be written.
            self.rejected = true
            let channel = context.channel
            let answer =
                "HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
            context.writeAndFlush(NIOAny(channel.allocator.buffer(string: answer)))
                .whenComplete { _ in channel.close(promise: nil) }
            return
        }
        context.fireChannelRead(data)
    }

    /// The request in progress arrived complete: the next one may take until the idle timeout to begin.
    func requestFinished(channel: any Channel) {
        self.requestBytes = nil
        self.schedule(self.limits.idleTimeout, channel: channel)
    }

    private func schedule(_ delay: Duration, channel: any Channel) {
        self.timer?.cancel()
        self.timer = channel.eventLoop.scheduleTask(in: TimeAmount(delay)) {
            channel.close(promise: nil)
        }
    }
}
