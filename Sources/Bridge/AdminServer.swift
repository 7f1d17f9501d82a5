import Logging
import NIOCore
import NIOHTTP1
import NIOPosix
import ServiceLifecycle

/// What `/readyz` reports.
public struct Readiness: Sendable, Hashable {
    /// Whether the instance can serve its partitions and APNs accepts it.
    public var isReady: Bool
    /// Why not, when not ready (for example `halted: InvalidProviderToken (app default)`).
    public var reason: String?

    /// Ready.
    public static let ready = Readiness(isReady: true, reason: nil)

    /// Not ready, for `reason`.
    public static func notReady(_ reason: String) -> Readiness {
        Readiness(isReady: false, reason: reason)
    }
}

/// The admin HTTP server (SPEC §5): `GET /metrics` (Prometheus text), `GET /healthz` (the process is alive)
/// and `GET /readyz` (200 when ready, 503 with a JSON reason otherwise).
///
/// It is plain HTTP/1.1 on SwiftNIO: scrapers and kubelets speak nothing else, and three fixed routes need no
/// framework.
public struct AdminServer: Service {
    /// Where to listen.
    public var host: String
    /// The port; `0` picks a free one (see ``onBound``).
    public var port: Int
    /// Produces the Prometheus text exposition on each scrape.
    public var metrics: @Sendable () -> [UInt8]
    /// Answers each readiness probe.
    public var readiness: @Sendable () -> Readiness
    /// Answers each liveness probe (`/healthz`): not alive only when the process cannot recover by itself
    /// (a fatal Kafka producer error), so Kubernetes restarts it.
    public var liveness: @Sendable () -> Readiness
    /// Called once the socket is bound, with the actual port.
    public var onBound: @Sendable (Int) -> Void
    let logger: Logger

    /// Creates the server; nothing listens until ``run()``.
    public init(
        host: String,
        port: Int,
        metrics: @escaping @Sendable () -> [UInt8],
        readiness: @escaping @Sendable () -> Readiness,
        liveness: @escaping @Sendable () -> Readiness = { .ready },
        onBound: @escaping @Sendable (Int) -> Void = { _ in },
        logger: Logger
    ) {
        self.host = host
        self.port = port
        self.metrics = metrics
        self.readiness = readiness
        self.liveness = liveness
        self.onBound = onBound
        self.logger = logger
    }

    /// Listens until graceful shutdown or cancellation, then closes the socket.
    public func run() async throws {
        let metrics = self.metrics
        let readiness = self.readiness
        let liveness = self.liveness
        let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.backlog, value: 64)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline(withErrorHandling: true)
                    try channel.pipeline.syncOperations.addHandler(
                        AdminHandler(metrics: metrics, readiness: readiness, liveness: liveness)
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
    private let liveness: @Sendable () -> Readiness
    private var head: HTTPRequestHead?

    init(
        metrics: @escaping @Sendable () -> [UInt8], readiness: @escaping @Sendable () -> Readiness,
        liveness: @escaping @Sendable () -> Readiness
    ) {
        self.metrics = metrics
        self.readiness = readiness
        self.liveness = liveness
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
            body = Self.statusBody(liveness.isReady ? "alive" : "failed", reason: liveness.reason)
        case (.GET, "/readyz"), (.HEAD, "/readyz"):
            let readiness = self.readiness()
            status = readiness.isReady ? .ok : .serviceUnavailable
            contentType = "application/json"
            body = Self.statusBody(readiness.isReady ? "ready" : "not_ready", reason: readiness.reason)
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
