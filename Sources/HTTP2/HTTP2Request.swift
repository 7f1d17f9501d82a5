/// A request the client sends on one stream.
package struct HTTP2Request: Sendable {
    /// The parts, in one object shared by every copy until one is changed (copy on write): a request is copied
    /// from its sender to the connection and into its stream's state, and a copy of the parts themselves retained
    /// and released each string and array of it, an atomic operation each, on every request.
    private var storage: Storage

    /// `:method`, for instance `POST`.
    package var method: String {
        get { self.storage.parts.method }
        set { self.unique().parts.method = newValue }
    }
    /// `:path`, for instance `/3/device/<token>`.
    package var path: String {
        get { self.storage.parts.path }
        set { self.unique().parts.path = newValue }
    }
    /// How HPACK may index `:path`; `never` by default (Apple's HPACK guidance: device tokens differ per request).
    package var pathIndexing: HTTP2HeaderIndexing {
        get { self.storage.parts.pathIndexing }
        set { self.unique().parts.pathIndexing = newValue }
    }
    /// `:authority`; `nil` uses the connection's host (and port when it is not 443).
    package var authority: String? {
        get { self.storage.parts.authority }
        set { self.unique().parts.authority = newValue }
    }
    /// Regular header fields, sent in this order after the pseudo-headers.
    package var headers: [HTTP2Header] {
        get { self.storage.parts.headers }
        set { self.unique().parts.headers = newValue }
    }
    /// More regular header fields, sent after ``headers``: the same, made cheaper to send.
    package var fields: HTTP2HeaderBlock {
        get { self.storage.parts.fields }
        set { self.unique().parts.fields = newValue }
    }
    /// The request body; empty sends no DATA frame.
    package var body: [UInt8] {
        get { self.storage.parts.body }
        set { self.unique().parts.body = newValue }
    }
    /// Whether the request opens its stream before the connection's other queued requests (those not expedited)
    /// when the stream limit makes requests wait; among themselves expedited requests keep their order.
    package var expedited: Bool {
        get { self.storage.parts.expedited }
        set { self.unique().parts.expedited = newValue }
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
        self.storage = Storage(
            Parts(
                method: method, path: path, pathIndexing: pathIndexing, authority: authority, headers: headers,
                fields: fields, body: body, expedited: expedited))
    }

    /// The storage, copied first when another request shares it.
    private mutating func unique() -> Storage {
        if !isKnownUniquelyReferenced(&self.storage) {
            self.storage = Storage(self.storage.parts)
        }
        return self.storage
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

    /// Mutated only through ``unique()``, that is while one request alone holds it.
    private final class Storage: @unchecked Sendable {
        var parts: Parts

        init(_ parts: Parts) {
            self.parts = parts
        }
    }
}
