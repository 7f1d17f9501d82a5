/// Why a client connection closed.
public enum HTTP2CloseReason: Sendable, Hashable {
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
public struct HTTP2ConnectionState: Sendable, Hashable {
    /// Streams open now.
    public var activeStreams: Int
    /// Requests waiting for a stream.
    public var queuedRequests: Int
    /// The effective stream limit: the smaller of the server's SETTINGS_MAX_CONCURRENT_STREAMS and the local cap.
    public var maxConcurrentStreams: Int
    /// Whether ``HTTP2ClientConnection/send(_:)`` accepts new requests (false after GOAWAY, loss or close).
    public var isAcceptingRequests: Bool
    /// The GOAWAY received, if any.
    public var goAway: HTTP2GoAway?
    /// PING frames acknowledged by the server so far.
    public var pingsAcknowledged: Int
    /// Streams opened so far on this connection.
    public var streamsOpened: Int
    /// Complete responses received so far on this connection (any status).
    public var responsesReceived: Int
}
