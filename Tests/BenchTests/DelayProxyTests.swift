import BenchSupport
import Foundation
import NIOCore
import NIOPosix
import Testing

/// `make bench --rtt-ms`'s relay: bytes pass both ways, in order, each direction held for half the round trip.
@Suite(.timeLimit(.minutes(1)))
struct DelayProxyTests {
    /// Echoes what it reads.
    final class Echo: ChannelInboundHandler, Sendable {
        typealias InboundIn = ByteBuffer
        typealias OutboundOut = ByteBuffer

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            context.writeAndFlush(data, promise: nil)
        }
    }

    @Test("an echo through the relay comes back whole, in order, one round trip later")
    func echoThroughTheRelay() async throws {
        let server = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture { try channel.pipeline.syncOperations.addHandler(Echo()) }
            }
            .bind(host: "127.0.0.1", port: 0).get()
        let proxy = try await DelayProxy.start(
            targetPort: server.localAddress?.port ?? 0, roundTrip: .milliseconds(400))
        let message = Array((0..<100_000).map { UInt8(truncatingIfNeeded: $0) })
        let started = ContinuousClock.now
        let received = try await Self.exchange(message, port: proxy.port)
        let waited = ContinuousClock.now - started
        await proxy.stop()
        try await server.close()
        #expect(received == message)
        // A deadline never fires early: the echo cannot come back before the round trip.
        #expect(waited >= .milliseconds(400))
        #expect(proxy.bytesRelayed == 2 * message.count)
    }

    /// Sends `message` to 127.0.0.1:`port` over plain TCP and reads as many bytes back.
    static func exchange(_ message: [UInt8], port: Int) async throws -> [UInt8] {
        let socket = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .connect(host: "127.0.0.1", port: port) { channel in
                channel.eventLoop.makeCompletedFuture {
                    try NIOAsyncChannel<ByteBuffer, ByteBuffer>(wrappingChannelSynchronously: channel)
                }
            }
        return try await socket.executeThenClose { inbound, outbound in
            try await outbound.write(ByteBuffer(bytes: message))
            var received: [UInt8] = []
            for try await chunk in inbound {
                received += chunk.readableBytesView
                if received.count >= message.count { break }
            }
            return received
        }
    }
}
