/// Why a client connection closed.
package enum HTTP2CloseReason: Sendable, Hashable {
    /// The owner called ``HTTP2ClientConnection/close()``.
    case closedLocally
    /// The server sent GOAWAY and every processed stream finished.
    case goAway(HTTP2GoAway)
    /// A PING went unanswered within the PING timeout.
    case pingTimeout
    /// The transport failed or the peer broke the protocol; the text says how.
    case connectionLost(String)
}

/// A snapshot of a client connection's state, for a pool.
package struct HTTP2ConnectionState: Sendable, Hashable {
    /// Streams open now.
    package var activeStreams: Int
    /// Requests waiting for a stream.
    package var queuedRequests: Int
    /// The effective stream limit: the smaller of the server's SETTINGS_MAX_CONCURRENT_STREAMS and the local cap.
    package var maxConcurrentStreams: Int
    /// Whether ``HTTP2ClientConnection/send(_:)`` accepts new requests (false after GOAWAY, loss or close).
    package var isAcceptingRequests: Bool
    /// The GOAWAY received, if any.
    package var goAway: HTTP2GoAway?
    /// PING frames acknowledged by the server so far.
    package var pingsAcknowledged: Int
    /// Streams opened so far on this connection.
    package var streamsOpened: Int
    /// Complete responses received so far on this connection (any status).
    package var responsesReceived: Int
}
