/// A response the server sends on a stream.
package struct HTTP2ServerResponse: Sendable {
    /// `:status`; `nil` sends a header block without `:status` (only to test clients against malformed responses).
    package var status: Int?
    /// Regular header fields.
    package var headers: [HTTP2Header]
    /// The body; empty ends the stream with the HEADERS frame.
    package var body: [UInt8]

    /// A response.
    package init(status: Int?, headers: [HTTP2Header] = [], body: [UInt8] = []) {
        self.status = status
        self.headers = headers
        self.body = body
    }
}
