// An HTTP/2 server over TLS on nghttp2: the engine of the APNs simulator and of the HTTP2 tests.

import Logging
import NIOCore
import NIOPosix
import NIOSSL
import Synchronization

/// An HTTP/2 server over TLS (ALPN `h2`) that delivers each complete request to a handler and offers control knobs
/// per connection and for all live connections: GOAWAY, SETTINGS_MAX_CONCURRENT_STREAMS, abrupt drop.
package final class HTTP2Server: Sendable {
    private let shared: ServerShared
    private let listener: any Channel

    private init(shared: ServerShared, listener: any Channel) {
        self.shared = shared
        self.listener = listener
    }

    /// Binds and starts listening. Throws ``HTTP2Error`` with code `serverStartFailed`.
    package static func start(
        configuration: HTTP2ServerConfiguration,
        eventLoopGroup: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton,
        logger: Logger = Logger(label: "pushbridge.http2.server"),
        handler: @escaping HTTP2ServerHandler
    ) async throws -> HTTP2Server {
        var tls = TLSConfiguration.makeServerConfiguration(
            certificateChain: configuration.certificateChain.map { .certificate($0) },
            privateKey: .privateKey(configuration.privateKey)
        )
        tls.minimumTLSVersion = .tlsv12
        tls.applicationProtocols = ["h2"]
        if let roots = configuration.clientCertificateTrustRoots {
            tls.certificateVerification = .noHostnameVerification
            tls.trustRoots = .certificates(roots)
        }
        let sslContext: NIOSSLContext
        do {
            sslContext = try NIOSSLContext(configuration: tls)
        } catch {
            throw HTTP2Error(.serverStartFailed, "invalid server TLS material (certificate chain or key)", cause: error)
        }
        let shared = ServerShared(configuration: configuration, logger: logger, handler: handler)
        let bootstrap = ServerBootstrap(group: eventLoopGroup)
            .serverChannelOption(.backlog, value: 256)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(.tcpOption(.tcp_nodelay), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let connection = HTTP2ServerConnectionHandler(shared: shared, channel: channel)
                    try channel.pipeline.syncOperations.addHandler(NIOSSLServerHandler(context: sslContext))
                    try channel.pipeline.syncOperations.addHandler(connection)
                }
            }
        do {
            let listener = try await bootstrap.bind(host: configuration.host, port: configuration.port).get()
            return HTTP2Server(shared: shared, listener: listener)
        } catch {
            throw HTTP2Error(
                .serverStartFailed, "cannot listen on \(configuration.host):\(configuration.port)", cause: error
            )
        }
    }

    /// The bound port (the ephemeral one when the configuration said 0).
    package var port: Int { self.listener.localAddress?.port ?? 0 }

    /// Counters so far.
    package var statistics: HTTP2ServerStatistics {
        let (accepted, open) = self.shared.state.withLock { ($0.nextConnectionID - 1, $0.connections.count) }
        return HTTP2ServerStatistics(
            connectionsAccepted: accepted,
            connectionsOpen: open,
            requestsReceived: self.shared.requestsReceived.load(ordering: .relaxed),
            maxConcurrentStreamsSeen: self.shared.maxConcurrentStreamsSeen.load(ordering: .relaxed),
            streamsRefused: self.shared.streamsRefused.load(ordering: .relaxed),
            protocolErrorGoAways: self.shared.protocolErrorGoAways.load(ordering: .relaxed),
            pingsReceived: self.shared.pingsReceived.load(ordering: .relaxed),
            requestsOverLimits: self.shared.requestsOverLimits.load(ordering: .relaxed)
        )
    }

    /// Sends GOAWAY on one connection (`connectionID`) or on all live ones (`nil`). `lastStreamID` `nil` means the
    /// last stream the connection received. The connection closes once its remaining streams are answered.
    package func sendGoAway(
        connectionID: Int? = nil,
        lastStreamID: Int32? = nil,
        errorCode: HTTP2ErrorCode = .noError,
        debugData: [UInt8] = []
    ) {
        for connection in self.shared.connections(connectionID) {
            connection.onLoop { $0.sendGoAway(lastStreamID: lastStreamID, errorCode: errorCode, debugData: debugData) }
        }
    }

    /// Announces a new SETTINGS_MAX_CONCURRENT_STREAMS on one connection or on all live ones (`nil`, which also
    /// sets it for connections accepted later).
    package func setMaxConcurrentStreams(_ streams: Int, connectionID: Int? = nil) {
        if connectionID == nil {
            self.shared.state.withLock { $0.maxConcurrentStreams = streams }
        }
        for connection in self.shared.connections(connectionID) {
            connection.onLoop { $0.setMaxConcurrentStreams(streams) }
        }
    }

    /// Closes one connection (`connectionID`) or all (`nil`) abruptly, without GOAWAY.
    package func dropConnections(connectionID: Int? = nil) {
        for connection in self.shared.connections(connectionID) {
            connection.channel.close(promise: nil)
        }
    }

    /// Stops listening and closes every connection. Returns when all are closed.
    package func shutdown() async {
        try? await self.listener.close()
        for connection in self.shared.connections(nil) {
            try? await connection.channel.close()
        }
    }
}

/// State shared by the server, its connections and the control methods.
final class ServerShared: Sendable {
    struct State {
        var connections: [Int: ServerConnectionBox] = [:]
        var nextConnectionID = 1
        var maxConcurrentStreams: Int
        var goAwayAfterStreams: Int?
    }

    let configuration: HTTP2ServerConfiguration
    let logger: Logger
    let handler: HTTP2ServerHandler
    let state: Mutex<State>
    let requestsReceived = Atomic<Int>(0)
    let maxConcurrentStreamsSeen = Atomic<Int>(0)
    let streamsRefused = Atomic<Int>(0)
    let protocolErrorGoAways = Atomic<Int>(0)
    let pingsReceived = Atomic<Int>(0)
    let requestsOverLimits = Atomic<Int>(0)

    init(configuration: HTTP2ServerConfiguration, logger: Logger, handler: @escaping HTTP2ServerHandler) {
        self.configuration = configuration
        self.logger = logger
        self.handler = handler
        self.state = Mutex(
            State(
                maxConcurrentStreams: configuration.maxConcurrentStreams,
                goAwayAfterStreams: configuration.goAwayAfterStreams
            )
        )
    }

    /// One connection, or all live ones when `id` is nil.
    func connections(_ id: Int?) -> [ServerConnectionBox] {
        self.state.withLock { state in
            if let id { return state.connections[id].map { [$0] } ?? [] }
            return Array(state.connections.values)
        }
    }

    /// Registers a new connection; returns its id and the settings it starts with.
    func register(_ box: ServerConnectionBox) -> (id: Int, maxConcurrentStreams: Int, goAwayAfterStreams: Int?) {
        self.state.withLock { state in
            let id = state.nextConnectionID
            state.nextConnectionID += 1
            state.connections[id] = box
            return (id, state.maxConcurrentStreams, state.goAwayAfterStreams)
        }
    }

    func unregister(_ id: Int) {
        _ = self.state.withLock { $0.connections.removeValue(forKey: id) }
    }
}

/// The per-connection handle responders and control methods use to reach their connection's event loop.
/// Answers from the event loop go straight to nghttp2; answers from other threads are batched: one event-loop
/// wake-up per batch.
final class ServerConnectionBox: Sendable {
    let channel: any Channel
    let handler: NIOLoopBound<HTTP2ServerConnectionHandler>
    private let inbox = Mutex<(answers: [(Int32, HTTP2ServerResponse)], scheduled: Bool)>(([], false))

    init(channel: any Channel, handler: HTTP2ServerConnectionHandler) {
        self.channel = channel
        self.handler = NIOLoopBound(handler, eventLoop: channel.eventLoop)
    }

    /// Runs `body` with the handler on the event loop.
    func onLoop(_ body: @escaping @Sendable (HTTP2ServerConnectionHandler) -> Void) {
        let handler = self.handler
        self.channel.eventLoop.execute {
            body(handler.value)
        }
    }

    func respond(streamID: Int32, response: HTTP2ServerResponse) {
        if self.channel.eventLoop.inEventLoop {
            self.handler.value.respond(streamID: streamID, response: response)
            return
        }
        let wake = self.inbox.withLock { inbox in
            inbox.answers.append((streamID, response))
            if inbox.scheduled { return false }
            inbox.scheduled = true
            return true
        }
        if wake {
            self.channel.eventLoop.execute {
                let answers = self.inbox.withLock { inbox in
                    inbox.scheduled = false
                    let answers = inbox.answers
                    inbox.answers.removeAll(keepingCapacity: true)
                    return answers
                }
                let handler = self.handler.value
                for (streamID, response) in answers {
                    handler.respond(streamID: streamID, response: response)
                }
            }
        }
    }

    func reset(streamID: Int32, errorCode: HTTP2ErrorCode) {
        self.onLoop { $0.reset(streamID: streamID, errorCode: errorCode) }
    }
}
