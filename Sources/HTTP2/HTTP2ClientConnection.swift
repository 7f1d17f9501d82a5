// A client connection: one TCP + TLS connection speaking HTTP/2 through one nghttp2 session.

import Logging
import NIOCore
import NIOPosix
import NIOSSL

/// One HTTP/2 client connection over TLS (ALPN `h2`), one-shot: it is opened by ``connect(configuration:eventLoopGroup:logger:)``
/// and never reconnects. Requests beyond the stream limit wait in a FIFO queue; every request has a timeout. After
/// GOAWAY, a lost connection or ``close()``, it accepts no new requests; a pool replaces it.
public final class HTTP2ClientConnection: Sendable {
    /// Opens a connection: a fresh DNS lookup, TCP, TLS 1.2+ with ALPN `h2`, the HTTP/2 preface, and the server's
    /// first SETTINGS. Throws ``HTTP2Error`` with code `connectFailed`.
    public static func connect(
        configuration: HTTP2ClientConfiguration,
        eventLoopGroup: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton,
        logger: Logger = Logger(label: "pushbridge.http2")
    ) async throws -> HTTP2ClientConnection {
        fatalError("not yet")
    }

    /// Sends `request` and returns the complete response. Throws ``HTTP2Error``: `notProcessed` (safe to re-send
    /// elsewhere), `connectionLost`, `timeout`, `malformedResponse`, `closed`, `cancelled`, `invalidRequest`.
    public func send(_ request: HTTP2Request) async throws -> HTTP2Response {
        fatalError("not yet")
    }

    /// A snapshot of the connection's state (stream counts, limit, whether it accepts requests).
    public var state: HTTP2ConnectionState {
        fatalError("not yet")
    }

    /// Whether the connection accepts new requests (false after GOAWAY, loss or close).
    public var isAcceptingRequests: Bool { self.state.isAcceptingRequests }

    /// Returns once the connection is closed, with the reason.
    public func waitUntilClosed() async -> HTTP2CloseReason {
        fatalError("not yet")
    }

    /// Stops accepting requests, fails queued ones with `notProcessed`, lets open streams finish (each bounded by
    /// its timeout), sends GOAWAY and closes. Returns when closed.
    public func close() async {
        fatalError("not yet")
    }
}
