/// A request as the server received it on one stream.
public struct HTTP2ServerRequest: Sendable {
    /// `:method`.
    public var method: String
    /// `:path`.
    public var path: String
    /// `:authority`, empty when absent.
    public var authority: String
    /// Regular header fields in the order received.
    public var headers: [HTTP2Header]
    /// The body bytes.
    public var body: [UInt8]
    /// The stream id.
    public var streamID: Int32
}
