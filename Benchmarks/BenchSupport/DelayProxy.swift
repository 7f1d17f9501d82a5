// A TCP relay on 127.0.0.1 that holds every byte for a fixed time in each direction: the APNs round trip for
// `make bench --rtt`, on loopback and without root. This project's kernels may lack `sch_netem` (tc's delay;
// "Specified qdisc kind is unknown" on the build machine), and a relay delays only the traffic that goes through it
// (the APNs server's), not Kafka's.

import NIOCore
import NIOPosix
import Synchronization

/// Listens on 127.0.0.1 and relays each connection to `127.0.0.1:targetPort`, delivering every chunk read from
/// one side to the other `oneWayDelay` later, in order. A round trip through it takes twice `oneWayDelay` more than
/// without it. Bytes are relayed as they are (TLS passes through).
package final class DelayProxy: Sendable {
    /// The port it listens on.
    package let port: Int
    /// The delay added in each direction.
    package let oneWayDelay: Duration
    private let channel: any Channel
    private let counter: ByteCounter

    /// Bytes relayed so far, both directions.
    package var bytesRelayed: Int { self.counter.bytes.load(ordering: .relaxed) }

    private init(port: Int, oneWayDelay: Duration, channel: any Channel, counter: ByteCounter) {
        self.port = port
        self.oneWayDelay = oneWayDelay
        self.channel = channel
        self.counter = counter
    }

    /// Starts a relay to `127.0.0.1:targetPort` adding `roundTrip` to every round trip (half each way).
    package static func start(targetPort: Int, roundTrip: Duration) async throws -> DelayProxy {
        let oneWay = roundTrip / 2
        let delay = TimeAmount(oneWay)
        let counter = ByteCounter()
        let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(.tcpOption(.tcp_nodelay), value: 1)
            // Nothing is read from the client before the connection to the server exists.
            .childChannelOption(.autoRead, value: false)
            .childChannelInitializer { inbound in
                inbound.eventLoop.makeCompletedFuture {
                    try inbound.pipeline.syncOperations.addHandler(
                        ConnectingRelay(targetPort: targetPort, delay: delay, counter: counter))
                }
            }
            .bind(host: "127.0.0.1", port: 0)
            .get()
        return DelayProxy(
            port: channel.localAddress?.port ?? 0, oneWayDelay: oneWay, channel: channel, counter: counter)
    }

    /// Stops listening; relayed connections end when either side closes.
    package func stop() async {
        try? await self.channel.close()
    }
}

private final class ByteCounter: Sendable {
    let bytes = Atomic<Int>(0)
}

/// The client's side of a relayed connection: once it is active, connects to the server (the server's side
/// relays back through a ``DelayedRelay``), then reads, relaying like a ``DelayedRelay``.
private final class ConnectingRelay: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer

    private let targetPort: Int
    private let delay: TimeAmount
    private let counter: ByteCounter
    private var relay: DelayedRelay?

    init(targetPort: Int, delay: TimeAmount, counter: ByteCounter) {
        self.targetPort = targetPort
        self.delay = delay
        self.counter = counter
    }

    func channelActive(context: ChannelHandlerContext) {
        let inbound = context.channel
        let (delay, counter) = (self.delay, self.counter)
        let connected = ClientBootstrap(group: context.eventLoop)
            .channelOption(.tcpOption(.tcp_nodelay), value: 1)
            .channelInitializer { outbound in
                outbound.eventLoop.makeCompletedFuture {
                    try outbound.pipeline.syncOperations.addHandler(
                        DelayedRelay(peer: inbound, delay: delay, counter: counter))
                }
            }
            .connect(host: "127.0.0.1", port: self.targetPort)
        connected.hop(to: context.eventLoop).assumeIsolated().whenComplete { result in
            switch result {
            case .success(let outbound):
                self.relay = DelayedRelay(peer: outbound, delay: delay, counter: counter)
                // Nothing was read before (autoRead is off until here).
                try? inbound.syncOptions?.setOption(.autoRead, value: true)
                inbound.read()
            case .failure:
                inbound.close(promise: nil)
            }
        }
        context.fireChannelActive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        self.relay?.channelRead(context: context, data: data)
    }

    func channelInactive(context: ChannelHandlerContext) {
        if let relay = self.relay { relay.channelInactive(context: context) } else { context.fireChannelInactive() }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
    }
}

/// One direction of a relayed connection: what this channel reads is written to `peer` `delay` later, and its
/// close reaches `peer` as late.
private final class DelayedRelay: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer

    private let peer: any Channel
    private let delay: TimeAmount
    private let counter: ByteCounter

    init(peer: any Channel, delay: TimeAmount, counter: ByteCounter) {
        self.peer = peer
        self.delay = delay
        self.counter = counter
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let bytes = self.unwrapInboundIn(data)
        self.counter.bytes.add(bytes.readableBytes, ordering: .relaxed)
        let peer = self.peer
        // The same delay for every chunk keeps them in order (both channels are on one event loop).
        context.eventLoop.scheduleTask(in: self.delay) { peer.writeAndFlush(bytes, promise: nil) }
    }

    func channelInactive(context: ChannelHandlerContext) {
        let peer = self.peer
        context.eventLoop.scheduleTask(in: self.delay) { peer.close(promise: nil) }
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
    }
}
