/// A complete response: status, headers (without pseudo-headers) and body bytes, exactly as received.
public struct HTTP2Response: Sendable {
    /// `:status`.
    public var status: Int
    /// Regular header fields in the order received.
    public var headers: [HTTP2Header]
    /// The body bytes, whatever they are (a body that is not what the caller expects is still delivered).
    public var body: [UInt8]

    /// A response.
    public init(status: Int, headers: [HTTP2Header] = [], body: [UInt8] = []) {
        self.status = status
        self.headers = headers
        self.body = body
    }
}
