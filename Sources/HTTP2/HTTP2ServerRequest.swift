/// A request as the server received it on one stream.
package struct HTTP2ServerRequest: Sendable {
    /// `:method`.
    package var method: String
    /// `:path`.
    package var path: String
    /// `:authority`, empty when absent.
    package var authority: String
    /// Regular header fields in the order received.
    package var headers: [HTTP2Header]
    /// The body bytes.
    package var body: [UInt8]
    /// The stream id.
    package var streamID: Int32
}
