/// `outcomes.forward_headers`: the source event's Kafka headers that every record made from it carries, byte for
/// byte (docs/data-contract.md, "Forwarded headers"), such as W3C trace context, so that a trace does not end at
/// the bridge.
package struct HeaderForwarding: Sendable, Hashable {
    /// The header names, in the order written; compared with the event's header names byte for byte (Kafka header
    /// names are case-sensitive).
    package let names: [String]

    /// The most names `forward_headers` may list.
    package static let maximumNames = 16
    /// The longest name, in bytes.
    package static let maximumNameBytes = 128
    /// The largest value forwarded, in bytes: W3C's limit for `baggage`, the largest of the trace headers. A
    /// larger value is not forwarded, and the record names it in ``droppedHeader`` instead.
    package static let maximumValueBytes = 8192
    /// The header that names, comma-separated, the forwarded headers whose value was larger than
    /// ``maximumValueBytes`` (absent when none was).
    package static let droppedHeader = "pushbridge-forward-dropped"

    /// Forwarding of `names` (checked by the configuration loader).
    package init(names: [String] = []) {
        self.names = names
    }

    /// Whether nothing is forwarded.
    package var isEmpty: Bool { self.names.isEmpty }

    /// What an event's records carry.
    package struct Selection: Sendable {
        /// The forwarded headers, in the order of ``HeaderForwarding/names``: each the event's last header of that
        /// name (as templates read `_headers.<name>`), its value unchanged (a null header stays null). Absent
        /// when the event has no header of that name.
        package var forwarded: [(String, [UInt8]?)]
        /// The names whose value was larger than ``HeaderForwarding/maximumValueBytes``.
        package var dropped: [String]

        /// The headers records carry: ``forwarded``, then ``HeaderForwarding/droppedHeader`` when any was dropped.
        package var recordHeaders: [(String, [UInt8]?)] {
            guard !self.dropped.isEmpty else { return self.forwarded }
            return self.forwarded + [(HeaderForwarding.droppedHeader, Array(self.dropped.joined(separator: ",").utf8))]
        }

        /// The bytes ``recordHeaders`` hold: names and values.
        package var byteCount: Int {
            self.recordHeaders.reduce(0) { $0 + $1.0.utf8.count + ($1.1?.count ?? 0) }
        }
    }

    /// The headers of an event with `headers` that its records carry: one pass over the headers, comparing each
    /// name with at most ``maximumNames`` names.
    package func select(from headers: [(String, [UInt8]?)]) -> Selection {
        var last = [Int?](repeating: nil, count: self.names.count)
        for (offset, header) in headers.enumerated() {
            if let index = self.names.firstIndex(of: header.0) { last[index] = offset }
        }
        var selection = Selection(forwarded: [], dropped: [])
        for (index, offset) in last.enumerated() {
            guard let offset else { continue }
            let header = headers[offset]
            if (header.1?.count ?? 0) > Self.maximumValueBytes {
                selection.dropped.append(self.names[index])
            } else {
                selection.forwarded.append(header)
            }
        }
        return selection
    }
}
