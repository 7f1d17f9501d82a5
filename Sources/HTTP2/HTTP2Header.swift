/// How HPACK may store a header field in the peer's dynamic table.
///
/// On a field a server received, `never` says the sender marked it never-indexed and `incremental` stands for
/// every other representation.
package enum HTTP2HeaderIndexing: Sendable, Hashable {
    /// Incremental indexing: later requests can refer to the field by index (the default).
    case incremental
    /// Literal never indexed: the field is never added to any table. Apple asks for this for `:path` and
    /// `authorization` (Apple, "Sending notification requests to APNs").
    case never
    /// Incremental indexing the first time the connection sends a field of this name, never indexed after:
    /// the name enters both tables once and later fields refer to it, while their values, which differ from
    /// request to request, stay out and do not evict the entries that repeat. Apple asks for this for
    /// `apns-id`, `apns-expiration` and `apns-collapse-id` (the same page).
    case nameOnce
}

/// One HTTP/2 header field. Names are lower-case, as HTTP/2 requires.
package struct HTTP2Header: Sendable, Hashable {
    /// The field name, lower-case (`apns-topic`).
    package var name: String
    /// The field value.
    package var value: String
    /// How HPACK may index the field.
    package var indexing: HTTP2HeaderIndexing

    /// A header field; `indexing` defaults to incremental indexing.
    package init(_ name: String, _ value: String, indexing: HTTP2HeaderIndexing = .incremental) {
        self.name = name
        self.value = value
        self.indexing = indexing
    }
}

extension Array where Element == HTTP2Header {
    /// The value of the first field called `name` (compared case-insensitively), or `nil`.
    package func first(_ name: String) -> String? {
        let lowered = name.lowercased()
        return self.first { $0.name == lowered }?.value
    }
}

/// Request header fields with names fixed in the code, written once as bytes: the cheap way to send the same
/// fields on every request. The HTTP/2 client points nghttp2 at these bytes as they are, where ``HTTP2Header``
/// strings are first copied into a block on the event loop.
package struct HTTP2HeaderBlock: Sendable {
    struct Field: Sendable {
        var name: StaticString
        var value: Range<Int>
        var indexing: HTTP2HeaderIndexing
    }

    /// The values' bytes, one after the other.
    private(set) var values: [UInt8] = []
    private(set) var fields: [Field] = []

    /// An empty block with room for `fields` fields of `bytes` value bytes in all.
    package init(fields: Int = 0, bytes: Int = 0) {
        self.fields.reserveCapacity(fields)
        self.values.reserveCapacity(bytes)
    }

    /// Whether the block has no field.
    package var isEmpty: Bool { self.fields.isEmpty }

    /// Appends a field. `name` must be lower-case and not a pseudo-header (a programming error otherwise: it is a
    /// constant of the caller's code).
    package mutating func append(_ name: StaticString, _ value: String, indexing: HTTP2HeaderIndexing = .incremental) {
        precondition(
            name.utf8CodeUnitCount > 0 && name.utf8Start.pointee != UInt8(ascii: ":")
                && !UnsafeBufferPointer(start: name.utf8Start, count: name.utf8CodeUnitCount).contains {
                    $0 >= UInt8(ascii: "A") && $0 <= UInt8(ascii: "Z")
                },
            "HTTP/2 header names are lower-case and not pseudo-headers: \(name)")
        let start = self.values.count
        value.withHeaderBytes { self.values.append(contentsOf: $0) }
        self.fields.append(Field(name: name, value: start..<self.values.count, indexing: indexing))
    }

    /// The fields as ``HTTP2Header`` values, in order (for tests and logs; the client does not make them).
    package var headers: [HTTP2Header] {
        self.fields.map { field in
            HTTP2Header(
                field.name.description, String(decoding: self.values[field.value], as: UTF8.self),
                indexing: field.indexing)
        }
    }
}
