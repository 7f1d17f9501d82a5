/// A response the server sends on a stream.
public struct HTTP2ServerResponse: Sendable {
    /// `:status`; `nil` sends a header block without `:status` (only to test clients against malformed responses).
    public var status: Int?
    /// Regular header fields.
    public var headers: [HTTP2Header]
    /// The body; empty ends the stream with the HEADERS frame.
    public var body: [UInt8]

    /// A response.
    public init(status: Int?, headers: [HTTP2Header] = [], body: [UInt8] = []) {
        self.status = status
        self.headers = headers
        self.body = body
    }
}
