import NIOCore
import NIOPosix
import Synchronization

/// A deliberately broken HTTP proxy on 127.0.0.1: it reads the client's `CONNECT` request and answers as a test
/// chooses — a header that never ends, a status line of megabytes, bytes that are not HTTP, nothing at all — so that
/// the client's bounds on a proxy's answer can be tested (tinyproxy answers well).
package final class HostileProxy: Sendable {
    /// What the proxy does once the request's head arrived.
    package enum Behaviour: Sendable {
        /// Writes these bytes, then closes.
        case answer([UInt8])
        /// Writes `HTTP/1.1 200 OK` and then one header line after another, without end, while the client reads.
        case endlessHeader
        /// Writes `HTTP/1.1 200 ` and then `A`s without end, while the client reads.
        case endlessStatusLine
        /// Writes bytes that are not HTTP (a TLS alert, as from a server that expected TLS), then waits.
        case garbage
        /// Answers nothing and keeps the connection open.
        case silent
    }

    /// The bound port on 127.0.0.1.
    package let port: Int
    private let channel: any Channel
    private let counters: Counters

    private final class Counters: Sendable {
        let accepted = Atomic<Int>(0)
        let bytesWritten = Atomic<Int>(0)
        let closed = Atomic<Int>(0)
    }

    /// Connections accepted so far.
    package var connectionsAccepted: Int { self.counters.accepted.load(ordering: .relaxed) }
    /// Connections closed so far (by either side).
    package var connectionsClosed: Int { self.counters.closed.load(ordering: .relaxed) }
    /// Bytes written to clients so far, over every connection.
    package var bytesWritten: Int { self.counters.bytesWritten.load(ordering: .relaxed) }

    private init(port: Int, channel: any Channel, counters: Counters) {
        self.port = port
        self.channel = channel
        self.counters = counters
    }

    /// `http://127.0.0.1:port`.
    package var url: String { "http://127.0.0.1:\(self.port)" }

    /// Starts the proxy with `behaviour` for every connection.
    package static func start(behaviour: Behaviour) async throws -> HostileProxy {
        let counters = Counters()
        let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                counters.accepted.add(1, ordering: .relaxed)
                return channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(
                        HostileProxyHandler(behaviour: behaviour, counters: counters))
                }
            }
            .bind(host: "127.0.0.1", port: 0)
            .get()
        return HostileProxy(port: channel.localAddress?.port ?? 0, channel: channel, counters: counters)
    }

    /// Stops listening (open connections stay until their clients close them).
    package func shutdown() async {
        try? await self.channel.close()
    }

    private final class HostileProxyHandler: ChannelInboundHandler {
        typealias InboundIn = ByteBuffer
        let behaviour: Behaviour
        let counters: Counters
        var request: [UInt8] = []
        var answered = false

        init(behaviour: Behaviour, counters: Counters) {
            self.behaviour = behaviour
            self.counters = counters
        }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            guard !self.answered else { return }
            self.request += self.unwrapInboundIn(data).readableBytesView
            guard self.request.count > 4096 || self.request.suffix(4) == Array("\r\n\r\n".utf8) else { return }
            self.answered = true
            let channel = context.channel
            switch self.behaviour {
            case .answer(let bytes):
                Self.write(channel, bytes, counters: self.counters).whenComplete { _ in channel.close(promise: nil) }
            case .endlessHeader:
                Self.write(channel, Array("HTTP/1.1 200 OK\r\n".utf8), counters: self.counters)
                Self.writeForever(
                    channel, Array("X-Filler: \(String(repeating: "f", count: 1000))\r\n".utf8), counters: self.counters
                )
            case .endlessStatusLine:
                Self.write(channel, Array("HTTP/1.1 200 ".utf8), counters: self.counters)
                Self.writeForever(
                    channel, [UInt8](repeating: UInt8(ascii: "A"), count: 16 * 1024), counters: self.counters)
            case .garbage:
                Self.write(
                    channel, [0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 0x28, 0x0A, 0x00, 0xFF, 0xFE], counters: self.counters
                )
            case .silent:
                break
            }
        }

        @discardableResult
        private static func write(_ channel: any Channel, _ bytes: [UInt8], counters: Counters) -> EventLoopFuture<Void>
        {
            counters.bytesWritten.add(bytes.count, ordering: .relaxed)
            return channel.writeAndFlush(channel.allocator.buffer(bytes: bytes))
        }

        /// Writes `chunk` again each time the previous one reached the socket, until the connection closes: as fast
        /// as the client reads, never faster.
        private static func writeForever(_ channel: any Channel, _ chunk: [UInt8], counters: Counters) {
            guard channel.isActive else { return }
            Self.write(channel, chunk, counters: counters).whenSuccess {
                // A new turn of the loop, so a client that reads fast cannot make this recursion deep.
                channel.eventLoop.execute { Self.writeForever(channel, chunk, counters: counters) }
            }
        }

        func channelInactive(context: ChannelHandlerContext) {
            self.counters.closed.add(1, ordering: .relaxed)
            context.fireChannelInactive()
        }

        func errorCaught(context: ChannelHandlerContext, error: any Error) {
            context.close(promise: nil)
        }
    }
}
