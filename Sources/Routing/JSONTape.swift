import APNSCore

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A parsed JSON document as one flat array of nodes in document order (a "tape"), over its bytes: what the
/// parser makes, and what the mapper reads events in.
///
/// Why not the tree of ``JSONValue``: a tree is an array per object and array and a string per long value, each a
/// heap object whose reference count changes every time a value is copied out of its parent, and which is freed
/// member by member afterwards. The tape is a pair of buffers of trivial values: a lookup answers a node's index,
/// strings are read where they are, and nothing is counted. docs/architecture.md, "The parts and their
/// boundaries", has the rule.
///
/// Layout: a container's node comes first, then its children, each with its whole subtree; an object's children
/// are its members, each a key node (a string) followed by its value's nodes. Every node knows where its subtree
/// ends (``Node/end``), so siblings are found by skipping. What a projection leaves out is not on the tape.
///
/// This is a view: ``JSONDocument`` owns the buffers and must outlive it.
struct JSONTape {
    /// What a node is.
    enum Kind: UInt8, Sendable {
        case null, `false`, `true`, integer, double
        /// A string: its UTF-8 bytes (escapes decoded) are ``JSONTape/bytes`` at ``Node/first`` for
        /// ``Node/second`` bytes.
        case string
        /// An array of ``Node/second`` elements.
        case array
        /// An object of ``Node/second`` members.
        case object
    }

    /// One value. 16 bytes: offsets are 32-bit, so documents are limited to 4 GiB (Kafka's records are at most
    /// 2 GiB); a number keeps its 64 bits in ``first`` and ``second``.
    struct Node: Sendable {
        var kind: Kind
        var first: UInt32
        var second: UInt32
        /// The index after this node's subtree (its next sibling's, if it has one).
        var end: UInt32

        init(_ kind: Kind, first: UInt32 = 0, second: UInt32 = 0, end: UInt32) {
            self.kind = kind
            self.first = first
            self.second = second
            self.end = end
        }

        /// A number node holding `bits`.
        init(_ kind: Kind, bits: UInt64, end: UInt32) {
            self.init(
                kind, first: UInt32(truncatingIfNeeded: bits), second: UInt32(truncatingIfNeeded: bits >> 32), end: end)
        }

        var bits: UInt64 { UInt64(self.first) | UInt64(self.second) << 32 }
        /// For an array or an object: how many elements or members.
        var count: Int { Int(self.second) }
    }

    /// The largest document a tape can describe.
    static let maximumBytes = Int(UInt32.max)
    /// The root's index.
    static let root = 0

    /// The nodes; the root is the first.
    let nodes: UnsafeBufferPointer<Node>
    /// The document's bytes, with each string that had escapes decoded in place (a decoded string is never
    /// longer than its escaped form).
    let bytes: UnsafeBufferPointer<UInt8>

    /// The node at `index`.
    @inline(__always)
    func node(_ index: Int) -> Node { self.nodes[index] }

    /// The UTF-8 bytes of the string node at `index`.
    @inline(__always)
    func string(_ index: Int) -> UnsafeBufferPointer<UInt8> {
        let node = self.nodes[index]
        return UnsafeBufferPointer(rebasing: self.bytes[Int(node.first)..<Int(node.first) + Int(node.second)])
    }

    /// The member named `key` of the object at `index`, the last one when the name repeats (as
    /// ``JSONValue/subscript(_:)`` answers); `nil` when there is none or the node is no object. `segment` is the
    /// name as text, read only when it is longer than ``SegmentKey/inlineBytes``.
    func member(of index: Int, key: SegmentKey, segment: @autoclosure () -> String) -> Int? {
        guard self.nodes[index].kind == .object else { return nil }
        var found: Int?
        var child = index + 1
        let end = Int(self.nodes[index].end)
        while child < end {
            let value = child + 1
            if Int(self.nodes[child].second) == key.count, key.matches(self.string(child), segment: segment()) {
                found = value
            }
            child = Int(self.nodes[value].end)
        }
        return found
    }

    /// Element `offset` of the array at `index`; `nil` past its end or when the node is no array. Walks the
    /// elements before it: ``RenderScope`` charges a lookup `offset + 1` steps for it.
    func element(of index: Int, at offset: Int) -> Int? {
        guard self.nodes[index].kind == .array, offset >= 0, offset < self.nodes[index].count else { return nil }
        var child = index + 1
        for _ in 0..<offset { child = Int(self.nodes[child].end) }
        return child
    }

    /// One step of a path from the node at `index`, by the segment `key` (`segment` as text, read only for a long
    /// name): an object member, or an array element when the segment is a decimal index (as ``JSONValue``'s own
    /// lookup).
    func child(of index: Int, key: SegmentKey, segment: @autoclosure () -> String) -> Int? {
        switch self.nodes[index].kind {
        case .object:
            return self.member(of: index, key: key, segment: segment())
        case .array:
            guard let offset = key.index else { return nil }
            return self.element(of: index, at: offset)
        default:
            return nil
        }
    }

    /// The value at `index` as a ``JSONValue`` tree (arrays and objects at exactly their size).
    func value(_ index: Int) -> JSONValue {
        let node = self.nodes[index]
        switch node.kind {
        case .null: return .null
        case .false: return .bool(false)
        case .true: return .bool(true)
        case .integer: return .integer(Int64(bitPattern: node.bits))
        case .double: return .double(Double(bitPattern: node.bits))
        case .string: return .string(String(decoding: self.string(index), as: UTF8.self))
        case .array:
            var elements: [JSONValue] = []
            elements.reserveCapacity(node.count)
            var child = index + 1
            while child < Int(node.end) {
                elements.append(self.value(child))
                child = Int(self.nodes[child].end)
            }
            return .array(elements)
        case .object:
            var members: [(key: String, value: JSONValue)] = []
            members.reserveCapacity(node.count)
            var child = index + 1
            while child < Int(node.end) {
                members.append((key: String(decoding: self.string(child), as: UTF8.self), value: self.value(child + 1)))
                child = Int(self.nodes[child + 1].end)
            }
            return .object(members)
        }
    }

    /// Appends the compact JSON text of the value at `index`, exactly as ``JSONValue/serialize(into:)`` writes
    /// the same value.
    func serialize(_ index: Int, into output: inout [UInt8]) {
        let node = self.nodes[index]
        switch node.kind {
        case .null: output.append(contentsOf: "null".utf8)
        case .false: output.append(contentsOf: "false".utf8)
        case .true: output.append(contentsOf: "true".utf8)
        case .integer: JSONText.appendDecimal(Int64(bitPattern: node.bits), to: &output)
        case .double: JSONText.appendDouble(Double(bitPattern: node.bits), to: &output)
        case .string: JSONText.appendQuoted(utf8: self.string(index), to: &output)
        case .array:
            output.append(UInt8(ascii: "["))
            var child = index + 1
            while child < Int(node.end) {
                if child > index + 1 { output.append(UInt8(ascii: ",")) }
                self.serialize(child, into: &output)
                child = Int(self.nodes[child].end)
            }
            output.append(UInt8(ascii: "]"))
        case .object:
            output.append(UInt8(ascii: "{"))
            var child = index + 1
            while child < Int(node.end) {
                if child > index + 1 { output.append(UInt8(ascii: ",")) }
                JSONText.appendQuoted(utf8: self.string(child), to: &output)
                output.append(UInt8(ascii: ":"))
                self.serialize(child + 1, into: &output)
                child = Int(self.nodes[child + 1].end)
            }
            output.append(UInt8(ascii: "}"))
        }
    }

    /// Whether the value at `index` equals `value` (``JSONValue``'s type-exact equality), without building it
    /// unless `value` is an array or an object.
    func value(_ index: Int, equals value: JSONValue) -> Bool {
        let node = self.nodes[index]
        switch (node.kind, value) {
        case (.null, .null): return true
        case (.false, .bool(let expected)): return !expected
        case (.true, .bool(let expected)): return expected
        case (.integer, .integer(let expected)): return Int64(bitPattern: node.bits) == expected
        case (.double, .double(let expected)): return Double(bitPattern: node.bits) == expected
        case (.string, .string(let expected)):
            let actual = self.string(index)
            guard actual.count == expected.utf8.count else { return false }
            return expected.utf8.elementsEqual(actual)
        case (.array, .array), (.object, .object):
            return self.value(index) == value
        default:
            return false
        }
    }
}

/// A parsed event: the buffers its ``JSONTape`` reads, freed with it.
///
/// Immutable once parsed, hence `Sendable`; its tape is valid for as long as the document is alive.
final class JSONDocument: @unchecked Sendable {
    private let nodes: UnsafeMutableBufferPointer<JSONTape.Node>
    private let bytes: UnsafeMutableBufferPointer<UInt8>

    private let nodeCount: Int

    /// What the parser hands over: buffers allocated with `allocate(capacity:)`, the first `count` nodes
    /// initialised.
    struct Parsed {
        var nodes: UnsafeMutableBufferPointer<JSONTape.Node>
        var count: Int
        var bytes: UnsafeMutableBufferPointer<UInt8>
    }

    /// Takes ownership of what the parser made.
    init(taking parsed: Parsed) {
        self.nodes = parsed.nodes
        self.nodeCount = parsed.count
        self.bytes = parsed.bytes
    }

    deinit {
        self.nodes.deallocate()
        self.bytes.deallocate()
    }

    /// What its buffers take, in bytes: the nodes' room (grown by doubling) and the copy of the input.
    var allocatedBytes: Int { self.nodes.count * MemoryLayout<JSONTape.Node>.stride + self.bytes.count }

    /// The document's tape: valid while the document is alive (read it through a reference that keeps it so).
    var tape: JSONTape {
        JSONTape(
            nodes: UnsafeBufferPointer(rebasing: self.nodes[..<self.nodeCount]), bytes: UnsafeBufferPointer(self.bytes))
    }
}
