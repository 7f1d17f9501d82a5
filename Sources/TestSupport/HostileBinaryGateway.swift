import NIOCore
import NIOPosix
import NIOSSL
import NIOTLS
import Synchronization

/// A server that plays a misbehaving binary-protocol gateway for the sender's bounds: one that accepts TCP and
/// never answers TLS, one that completes TLS and then stops reading, one that answers an error packet on every
/// connection, one that closes every connection right after the handshake. The simulator's gateway
/// (`BinaryGateway`) is well-behaved by design, which is why these need their own.
package final class HostileBinaryGateway: Sendable {
    /// What the server does with each connection.
    package enum Behaviour: Sendable {
        /// Accepts TCP and never reads or writes a byte: a TLS tarpit.
        case tarpit
        /// Completes the TLS handshake, then never reads again (its receive buffer is kept small, so the
        /// client's bytes pile up on the client's side).
        case stopReading
        /// Completes the TLS handshake, and on the first bytes read answers an error packet with `status` naming
        /// identifier 1, then closes.
        case errorPacket(status: UInt8)
        /// Completes the TLS handshake and closes at once (a load balancer with no backend).
        case closeAfterHandshake
    }

    /// The receive buffer of a connection with ``Behaviour/stopReading`` (the kernel doubles it).
    package static let stoppedReceiveBufferBytes = 64 * 1024

    private let listener: CountingListener

    /// The bound port on 127.0.0.1.
    package var port: Int { self.listener.port }

    /// Connections accepted so far.
    package var connectionsAccepted: Int { self.listener.connectionsAccepted }

    private init(listener: CountingListener) {
        self.listener = listener
    }

    /// Starts a server on 127.0.0.1 with `tls`'s server certificate (no client certificate asked for).
    package static func start(tls: TestTLS, behaviour: Behaviour) async throws -> HostileBinaryGateway {
        let context = try NIOSSLContext(
            configuration: TLSConfiguration.makeServerConfiguration(
                certificateChain: try tls.serverCertificateChain().map { .certificate($0) },
                privateKey: .privateKey(try tls.serverPrivateKey())))
        let listener = try await CountingListener.bind { bootstrap in
            guard case .stopReading = behaviour else { return bootstrap }
            // Set on the listening socket so that accepted ones inherit it before the window is negotiated.
            return bootstrap.serverChannelOption(.socketOption(.so_rcvbuf), value: Self.stoppedReceiveBufferBytes)
        } initialize: { channel in
            if case .tarpit = behaviour {
                try channel.syncOptions?.setOption(.autoRead, value: false)
                return
            }
            try channel.pipeline.syncOperations.addHandler(NIOSSLServerHandler(context: context))
            try channel.pipeline.syncOperations.addHandler(HostileBinaryHandler(behaviour: behaviour))
        }
        return HostileBinaryGateway(listener: listener)
    }

    /// Stops listening.
    package func shutdown() async {
        await self.listener.shutdown()
    }
}

private final class HostileBinaryHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private let behaviour: HostileBinaryGateway.Behaviour
    private var answered = false

    init(behaviour: HostileBinaryGateway.Behaviour) {
        self.behaviour = behaviour
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if case .handshakeCompleted = event as? TLSUserEvent {
            switch self.behaviour {
            case .stopReading:
                try? context.channel.syncOptions?.setOption(.autoRead, value: false)
            case .closeAfterHandshake:
                context.close(promise: nil)
            case .tarpit, .errorPacket:
                break
            }
        }
        context.fireUserInboundEventTriggered(event)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard case .errorPacket(let status) = self.behaviour, !self.answered else { return }
        self.answered = true
        let packet: [UInt8] = [8, status, 0, 0, 0, 1]
        // The write is flushed into the socket at once; the close comes after it.
        context.writeAndFlush(self.wrapOutboundOut(context.channel.allocator.buffer(bytes: packet)), promise: nil)
        context.close(promise: nil)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
    }
}
