import NIOCore
import NIOPosix
import Synchronization

/// A TCP listener on 127.0.0.1 that counts the connections it accepts: what the hostile servers share. Each
/// accepted channel is set up by the server's own initializer (its TLS handler and its misbehaviour).
package final class CountingListener: Sendable {
    /// The bound port on 127.0.0.1.
    package let port: Int
    private let channel: any Channel
    private let accepted: Counter

    private final class Counter: Sendable {
        let count = Atomic<Int>(0)
    }

    private init(port: Int, channel: any Channel, accepted: Counter) {
        self.port = port
        self.channel = channel
        self.accepted = accepted
    }

    /// Connections accepted so far.
    package var connectionsAccepted: Int { self.accepted.count.load(ordering: .relaxed) }

    /// Listens on an ephemeral port of 127.0.0.1; `configure` may set options on the listening socket, and
    /// `initialize` sets up each accepted channel on its event loop.
    package static func bind(
        configure: (ServerBootstrap) -> ServerBootstrap = { $0 },
        initialize: @escaping @Sendable (any Channel) throws -> Void
    ) async throws -> CountingListener {
        let accepted = Counter()
        let bootstrap = configure(
            ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
                .serverChannelOption(.socketOption(.so_reuseaddr), value: 1))
        let channel = try await bootstrap.childChannelInitializer { channel in
            accepted.count.add(1, ordering: .relaxed)
            return channel.eventLoop.makeCompletedFuture { try initialize(channel) }
        }
        .bind(host: "127.0.0.1", port: 0)
        .get()
        return CountingListener(port: channel.localAddress?.port ?? 0, channel: channel, accepted: accepted)
    }

    /// Stops listening.
    package func shutdown() async {
        try? await self.channel.close()
    }
}
