import NIOCore
import NIOPosix
import NIOSSL
import NIOTLS

/// A TLS server that plays a misbehaving feedback service (binary protocol) for the poller's bounds: one that
/// streams tuples without end, one that never sends nor closes, one that sends chosen bytes and closes. The
/// simulator's service (`BinaryFeedbackService`) is well-behaved by design, which is why these need their own.
package final class HostileFeedbackServer: Sendable {
    /// What the server does once a connection's handshake completed.
    package enum Behaviour: Sendable {
        /// Writes valid 38-byte tuples, 64 KiB at a time, until the client goes away.
        case endless
        /// Writes nothing and keeps the connection open.
        case silent
        /// Writes these bytes, then closes.
        case bytes([UInt8])
    }

    /// The bound port on 127.0.0.1.
    package let port: Int
    private let channel: any Channel

    private init(port: Int, channel: any Channel) {
        self.port = port
        self.channel = channel
    }

    /// Starts a server on 127.0.0.1 with `tls`'s server certificate (no client certificate asked for).
    package static func start(tls: TestTLS, behaviour: Behaviour) async throws -> HostileFeedbackServer {
        let configuration = TLSConfiguration.makeServerConfiguration(
            certificateChain: try tls.serverCertificateChain().map { .certificate($0) },
            privateKey: .privateKey(try tls.serverPrivateKey()))
        let context = try NIOSSLContext(configuration: configuration)
        let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(NIOSSLServerHandler(context: context))
                    try channel.pipeline.syncOperations.addHandler(HostileFeedbackHandler(behaviour: behaviour))
                }
            }
            .bind(host: "127.0.0.1", port: 0)
            .get()
        return HostileFeedbackServer(port: channel.localAddress?.port ?? 0, channel: channel)
    }

    /// Stops listening.
    package func shutdown() async {
        try? await self.channel.close()
    }
}

private final class HostileFeedbackHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private let behaviour: HostileFeedbackServer.Behaviour

    init(behaviour: HostileFeedbackServer.Behaviour) {
        self.behaviour = behaviour
    }

    /// 64 KiB of valid tuples (time 1 700 000 000, a 32-byte token).
    private static let chunk: [UInt8] = {
        let tuple: [UInt8] = [0x65, 0x53, 0xF1, 0x00, 0x00, 0x20] + [UInt8](repeating: 0xAB, count: 32)
        return Array((0..<(65_536 / tuple.count)).map { _ in tuple }.joined())
    }()

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if case .handshakeCompleted = event as? TLSUserEvent {
            switch self.behaviour {
            case .endless:
                Self.writeForever(context.channel)
            case .silent:
                break
            case .bytes(let bytes):
                let channel = context.channel
                context.writeAndFlush(self.wrapOutboundOut(channel.allocator.buffer(bytes: bytes))).whenComplete { _ in
                    channel.close(promise: nil)
                }
            }
        }
        context.fireUserInboundEventTriggered(event)
    }

    /// Writes a chunk, and the next once it is written, until a write fails (the client closed).
    private static func writeForever(_ channel: any Channel) {
        channel.writeAndFlush(channel.allocator.buffer(bytes: Self.chunk)).whenSuccess {
            // A new turn of the loop, so a client that reads fast cannot make this recursion deep.
            channel.eventLoop.execute { Self.writeForever(channel) }
        }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {}

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
    }
}
