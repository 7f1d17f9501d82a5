// An HTTP/2 server over TLS on nghttp2: the engine of the APNs simulator and of the HTTP2 tests.

import Logging
import NIOCore
import NIOPosix
import NIOSSL

/// An HTTP/2 server over TLS (ALPN `h2`) that delivers each complete request to a handler and offers control knobs
/// per connection and for all live connections: GOAWAY, SETTINGS_MAX_CONCURRENT_STREAMS, abrupt drop.
public final class HTTP2Server: Sendable {
    /// Binds and starts listening. Throws ``HTTP2Error`` with code `serverStartFailed`.
    public static func start(
        configuration: HTTP2ServerConfiguration,
        eventLoopGroup: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton,
        logger: Logger = Logger(label: "pushbridge.http2.server"),
        handler: @escaping HTTP2ServerHandler
    ) async throws -> HTTP2Server {
        fatalError("not yet")
    }

    /// The bound port (the ephemeral one when the configuration said 0).
    public var port: Int { fatalError("not yet") }

    /// Ids of the connections open now.
    public var connectionIDs: [Int] { fatalError("not yet") }

    /// Counters so far.
    public var statistics: HTTP2ServerStatistics { fatalError("not yet") }

    /// Sends GOAWAY on one connection (`connectionID`) or on all live ones (`nil`). `lastStreamID` `nil` means the
    /// last stream the connection received. The connection closes once its remaining streams are answered.
    public func sendGoAway(
        connectionID: Int? = nil,
        lastStreamID: Int32? = nil,
        errorCode: HTTP2ErrorCode = .noError,
        debugData: [UInt8] = []
    ) {
        fatalError("not yet")
    }

    /// Announces a new SETTINGS_MAX_CONCURRENT_STREAMS on one connection or on all live ones (`nil`, which also
    /// sets it for connections accepted later).
    public func setMaxConcurrentStreams(_ streams: Int, connectionID: Int? = nil) {
        fatalError("not yet")
    }

    /// Sets or clears "GOAWAY after N streams" for every connection, live or future.
    public func setGoAwayAfterStreams(_ streams: Int?) {
        fatalError("not yet")
    }

    /// Closes one connection (`connectionID`) or all (`nil`) abruptly, without GOAWAY.
    public func dropConnections(connectionID: Int? = nil) {
        fatalError("not yet")
    }

    /// Stops listening and closes every connection. Returns when all are closed.
    public func shutdown() async {
        fatalError("not yet")
    }
}

/// The per-connection handle responders use to reach their connection's event loop.
final class ServerConnectionBox: Sendable {
    func respond(streamID: Int32, response: HTTP2ServerResponse) { fatalError("not yet") }
    func reset(streamID: Int32, errorCode: HTTP2ErrorCode) { fatalError("not yet") }
}
