import CopyOnWrite

/// A request the client sends on one stream.
package struct HTTP2Request: Sendable {
    /// The parts, in one object shared by every copy until one is changed: a request is copied from its sender to
    /// the connection and into its stream's state.
    private var storage: CopyOnWrite<Parts>

    /// `:method`, for instance `POST`.
    package var method: String {
        get { self.storage.value.method }
        set { self.storage.value.method = newValue }
    }
    /// `:path`, for instance `/3/device/<token>`.
    package var path: String {
        get { self.storage.value.path }
        set { self.storage.value.path = newValue }
    }
    /// How HPACK may index `:path`; `never` by default (Apple's HPACK guidance: device tokens differ per request).
    package var pathIndexing: HTTP2HeaderIndexing {
        get { self.storage.value.pathIndexing }
        set { self.storage.value.pathIndexing = newValue }
    }
    /// `:authority`; `nil` uses the connection's host (and port when it is not 443).
    package var authority: String? {
        get { self.storage.value.authority }
        set { self.storage.value.authority = newValue }
    }
    /// Regular header fields, sent in this order after the pseudo-headers.
    package var headers: [HTTP2Header] {
        get { self.storage.value.headers }
        set { self.storage.value.headers = newValue }
    }
    /// More regular header fields, sent after ``headers``: the same, made cheaper to send.
    package var fields: HTTP2HeaderBlock {
        get { self.storage.value.fields }
        set { self.storage.value.fields = newValue }
    }
    /// The request body; empty sends no DATA frame.
    package var body: [UInt8] {
        get { self.storage.value.body }
        set { self.storage.value.body = newValue }
    }
    /// Whether the request opens its stream before the connection's other queued requests (those not expedited)
    /// when the stream limit makes requests wait; among themselves expedited requests keep their order.
    package var expedited: Bool {
        get { self.storage.value.expedited }
        set { self.storage.value.expedited = newValue }
    }

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
        self.storage = CopyOnWrite(
            Parts(
                method: method, path: path, pathIndexing: pathIndexing, authority: authority, headers: headers,
                fields: fields, body: body, expedited: expedited))
    }

    private struct Parts {
        var method: String
        var path: String
        var pathIndexing: HTTP2HeaderIndexing
        var authority: String?
        var headers: [HTTP2Header]
        var fields: HTTP2HeaderBlock
        var body: [UInt8]
        var expedited: Bool
    }
}
