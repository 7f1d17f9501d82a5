// The one way every APNs connection is opened: TCP straight to the server, or through an HTTP proxy's CONNECT
// tunnel. TLS to the server starts only once the tunnel is open, and is verified against the server's name, never the
// proxy's.

import EgressProxy
import NIOCore
import NIOPosix

/// Opens TCP connections to APNs (HTTP/2, the binary gateway, the feedback service, `doctor`'s checks), directly or
/// through an ``EgressProxy``.
package enum EgressConnect {
    /// Connects to `host:port` (through `proxy`'s `CONNECT` tunnel when there is one) and then adds the connection's
    /// handlers with `configure` (TLS first), on the channel's event loop. The future completes once they are added:
    /// with a proxy, after the proxy answered 2xx; it fails with the TCP error, or an ``EgressProxyError`` naming the
    /// proxy (never its credentials) and what it answered.
    ///
    /// `timeout` bounds TCP and, with a proxy, the proxy's answer too: a proxy that accepts TCP and never answers
    /// fails it when `timeout` has passed since the call. The caller bounds its own handshake by what is left.
    package static func connect(
        host: String,
        port: Int,
        proxy: EgressProxy?,
        eventLoop: any EventLoop,
        timeout: Duration,
        configure: @escaping @Sendable (any Channel) throws -> Void
    ) -> EventLoopFuture<any Channel> {
        let amount = TimeAmount(clamping: timeout)
        let bootstrap = ClientBootstrap(group: eventLoop)
            .connectTimeout(amount)
            .channelOption(.tcpOption(.tcp_nodelay), value: 1)
        guard let proxy else {
            return
                bootstrap
                .channelInitializer { channel in channel.eventLoop.makeCompletedFuture { try configure(channel) } }
                .connect(host: host, port: port)
        }
        let deadline = NIODeadline.now() + amount
        let established = eventLoop.makePromise(of: Void.self)
        return
            bootstrap
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(
                        ProxyTunnelHandler(host: host, port: port, proxy: proxy, established: established))
                }
            }
            .connect(host: proxy.host, port: proxy.port)
            .flatMapErrorThrowing { error in
                established.fail(error)
                throw EgressProxyError(
                    .proxyUnreachable, proxy: proxy, host: host, port: port,
                    detail: "cannot connect to the proxy: \(error)")
            }
            .flatMap { channel in
                let timer = channel.eventLoop.scheduleTask(deadline: deadline) {
                    established.fail(
                        EgressProxyError(
                            .noAnswer, proxy: proxy, host: host, port: port,
                            detail: "the proxy did not answer CONNECT within \(timeout)"))
                }
                return established.futureResult.flatMapThrowing { () -> any Channel in
                    timer.cancel()
                    let tunnel = try channel.pipeline.syncOperations.handler(type: ProxyTunnelHandler.self)
                    try configure(channel)
                    // Out of the way now: what the proxy sent after its answer goes to TLS.
                    channel.pipeline.syncOperations.removeHandler(tunnel, promise: nil)
                    return channel
                }.flatMapErrorThrowing { error in
                    timer.cancel()
                    channel.close(promise: nil)
                    throw error
                }
            }
    }
}

/// Sends `CONNECT host:port` when the connection to the proxy is up, reads the answer (``ProxyConnectStateMachine``,
/// bounded), and completes `established` on a 2xx; any other answer, a close or an error fails it and closes the
/// connection. Once established it only holds what arrived after the answer, until it is removed.
///
/// Runs on the channel's event loop only, as every channel handler does.
final class ProxyTunnelHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private let host: String
    private let port: Int
    private let proxy: EgressProxy
    private let established: EventLoopPromise<Void>
    private var machine = ProxyConnectStateMachine()
    private var sent = false
    private var open = false
    private var leftover: [UInt8] = []

    init(host: String, port: Int, proxy: EgressProxy, established: EventLoopPromise<Void>) {
        self.host = host
        self.port = port
        self.proxy = proxy
        self.established = established
    }

    func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { self.sendRequest(context) }
    }

    func channelActive(context: ChannelHandlerContext) {
        self.sendRequest(context)
        context.fireChannelActive()
    }

    private func sendRequest(_ context: ChannelHandlerContext) {
        guard !self.sent else { return }
        self.sent = true
        let request = ProxyConnectStateMachine.request(
            host: self.host, port: self.port, credentials: self.proxy.credentials)
        context.writeAndFlush(self.wrapOutboundOut(context.channel.allocator.buffer(bytes: request)), promise: nil)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let buffer = self.unwrapInboundIn(data)
        guard !self.open else {
            self.leftover += buffer.readableBytesView
            return
        }
        switch self.machine.received(buffer.readableBytesView) {
        case .readMore:
            break
        case .established(let leftover):
            self.open = true
            self.leftover = leftover
            self.established.succeed()
        case .fail(.refused(let status, let phrase)):
            self.fail(
                context,
                .refused(status: status, reasonPhrase: phrase, proxy: self.proxy, host: self.host, port: self.port))
        case .fail(.malformed(let what)):
            self.fail(
                context,
                EgressProxyError(
                    .malformedAnswer, proxy: self.proxy, host: self.host, port: self.port,
                    detail: "the proxy answered CONNECT with \(what)"))
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        self.established.fail(
            EgressProxyError(
                .closedBeforeAnswer, proxy: self.proxy, host: self.host, port: self.port,
                detail: "the proxy closed the connection before answering CONNECT"))
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        guard !self.open else {
            context.fireErrorCaught(error)
            return
        }
        self.fail(
            context,
            EgressProxyError(
                .closedBeforeAnswer, proxy: self.proxy, host: self.host, port: self.port,
                detail: "the connection to the proxy failed before it answered CONNECT: \(error)"))
    }

    private func fail(_ context: ChannelHandlerContext, _ error: EgressProxyError) {
        self.established.fail(error)
        context.close(promise: nil)
    }

    func removeHandler(context: ChannelHandlerContext, removalToken: ChannelHandlerContext.RemovalToken) {
        if !self.leftover.isEmpty {
            let bytes = self.leftover
            self.leftover = []
            context.fireChannelRead(self.wrapInboundOut(context.channel.allocator.buffer(bytes: bytes)))
            context.fireChannelReadComplete()
        }
        context.leavePipeline(removalToken: removalToken)
    }
}
