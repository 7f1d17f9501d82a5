/// A complete response: status, headers (without pseudo-headers) and body bytes, exactly as received.
package struct HTTP2Response: Sendable {
    /// `:status`.
    package var status: Int
    /// Regular header fields in the order received.
    package var headers: [HTTP2Header]
    /// The body bytes, whatever they are (a body that is not what the caller expects is still delivered).
    package var body: [UInt8]

    /// A response.
    package init(status: Int, headers: [HTTP2Header] = [], body: [UInt8] = []) {
        self.status = status
        self.headers = headers
        self.body = body
    }
}
