/// A request the client sends on one stream.
package struct HTTP2Request: Sendable {
    /// `:method`, for instance `POST`.
    package var method: String
    /// `:path`, for instance `/3/device/<token>`.
    package var path: String
    /// How HPACK may index `:path`; `never` by default (Apple's HPACK guidance: device tokens differ per request).
    package var pathIndexing: HTTP2HeaderIndexing
    /// `:authority`; `nil` uses the connection's host (and port when it is not 443).
    package var authority: String?
    /// Regular header fields, sent in this order after the pseudo-headers.
    package var headers: [HTTP2Header]
    /// More regular header fields, sent after ``headers``: the same, made cheaper to send.
    package var fields: HTTP2HeaderBlock
    /// The request body; empty sends no DATA frame.
    package var body: [UInt8]
    /// Whether the request opens its stream before the connection's other queued requests (those not expedited)
    /// when the stream limit makes requests wait; among themselves expedited requests keep their order.
    package var expedited: Bool

    /// A request. `pathIndexing` defaults to `.never`.
    package init(
        method: String = "POST",
        path: String,
        pathIndexing: HTTP2HeaderIndexing = .never,
        authority: String? = nil,
        headers: [HTTP2Header] = [],
        fields: HTTP2HeaderBlock = HTTP2HeaderBlock(),
        body: [UInt8] = [],
        expedited: Bool = false
    ) {
        self.method = method
        self.path = path
        self.pathIndexing = pathIndexing
        self.authority = authority
        self.headers = headers
        self.fields = fields
        self.body = body
        self.expedited = expedited
    }
}
