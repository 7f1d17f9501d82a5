/// A text template laid out for rendering: its pieces as one buffer of trivial operations, its literal text in one
/// byte buffer and its names in one table, all made once when the route compiles.
///
/// Why not render the segment tree (``TextTemplate/Segment``) itself: every `switch` over a segment copied its
/// payload out (the text's arrays, the path's strings), a retain and a release each, per segment, per event. Here a
/// rendering reads operations, bytes and names in place through the buffers, and counts no reference
/// (docs/architecture.md, "The parts and their boundaries").
final class TextProgram: @unchecked Sendable {
    /// What an operation does.
    enum Kind: UInt8 {
        /// Writes literal text: raw at `first` (`second` bytes), JSON-escaped at `third` (`fourth` bytes).
        case text
        /// Writes the value of the name at `first` in ``paths``.
        case variable
        /// A section over the name at `first` in ``paths``, `inverted` or not; its body is the operations after it,
        /// up to `second` (exclusive).
        case section
    }

    /// One operation.
    struct Operation {
        var kind: Kind
        var inverted = false
        var first = 0
        var second = 0
        var third = 0
        var fourth = 0
    }

    /// The operations, in template order; a section's body follows it.
    let operations: UnsafeMutableBufferPointer<Operation>
    /// Literal text, raw and escaped.
    let bytes: UnsafeMutableBufferPointer<UInt8>
    /// The names the tags read.
    let names: NameTable

    /// Lays `segments` out.
    init(_ segments: [TextTemplate.Segment]) {
        var operations: [Operation] = []
        var bytes: [UInt8] = []
        var paths: [TemplatePath] = []
        func layOut(_ segments: [TextTemplate.Segment]) {
            for segment in segments {
                switch segment {
                case .text(let raw, let escaped):
                    operations.append(
                        Operation(
                            kind: .text, first: bytes.count, second: raw.count, third: bytes.count + raw.count,
                            fourth: escaped.count))
                    bytes.append(contentsOf: raw)
                    bytes.append(contentsOf: escaped)
                case .variable(let path):
                    operations.append(Operation(kind: .variable, first: paths.count))
                    paths.append(path)
                case .section(let path, let inverted, let body):
                    let section = operations.count
                    operations.append(Operation(kind: .section, inverted: inverted, first: paths.count))
                    paths.append(path)
                    layOut(body)
                    operations[section].second = operations.count
                }
            }
        }
        layOut(segments)
        self.operations = frozen(operations)
        self.bytes = frozen(bytes)
        self.names = NameTable(paths)
    }

    deinit {
        self.operations.deallocate()
        self.bytes.deallocate()
    }

    /// The literal text of the operation at `index`.
    @inline(__always)
    func text(_ index: Int, escaped: Bool) -> UnsafeBufferPointer<UInt8> {
        let operation = self.operations[index]
        let range =
            escaped
            ? operation.third..<operation.third + operation.fourth
            : operation.first..<operation.first + operation.second
        return UnsafeBufferPointer(rebasing: self.bytes[range])
    }
}

/// `array`'s elements in a buffer of their own, owned by the caller.
private func frozen<Element>(_ array: [Element]) -> UnsafeMutableBufferPointer<Element> {
    let buffer = UnsafeMutableBufferPointer<Element>.allocate(capacity: array.count)
    _ = buffer.initialize(fromContentsOf: array)
    return buffer
}

/// A name as a lookup reads it: where it starts and its segments' keys, trivially copied, and the name itself for
/// what needs its text (a `_kafka` or `_headers` field, a segment longer than ``SegmentKey/inlineBytes``, a
/// message). A copy of a ``TemplatePath`` retains its strings and arrays; a reference counts nothing.
///
/// Valid while what it points into lives: a ``TextProgram``'s buffers, or the scope of
/// ``TemplatePath/withReference(_:)``.
struct PathReference {
    let root: TemplatePath.Root
    let keys: UnsafeBufferPointer<SegmentKey>
    let path: UnsafePointer<TemplatePath>
}

extension TemplatePath {
    /// Runs `body` with a reference to this name.
    func withReference<T>(_ body: (PathReference) -> T) -> T {
        withUnsafePointer(to: self) { path in
            self.keys.withUnsafeBufferPointer { keys in body(PathReference(root: self.root, keys: keys, path: path)) }
        }
    }
}

/// The names a template program reads, each as a ``TemplatePath`` and as a ``PathReference`` into the table's own
/// buffers.
final class NameTable: @unchecked Sendable {
    /// The names.
    let paths: UnsafeMutableBufferPointer<TemplatePath>
    /// Their segments' keys, one name's after another's.
    private let keys: UnsafeMutableBufferPointer<SegmentKey>
    /// The names as lookups read them, one per entry of ``paths``.
    private let references: UnsafeMutableBufferPointer<PathReference>

    init(_ paths: [TemplatePath]) {
        self.paths = frozen(paths)
        self.keys = frozen(paths.flatMap(\.keys))
        var references: [PathReference] = []
        var start = 0
        for index in paths.indices {
            let count = paths[index].keys.count
            references.append(
                PathReference(
                    root: paths[index].root, keys: UnsafeBufferPointer(rebasing: self.keys[start..<start + count]),
                    path: UnsafePointer(self.paths.baseAddress.unsafelyUnwrapped + index)))
            start += count
        }
        self.references = frozen(references)
    }

    deinit {
        self.paths.deinitialize()
        self.paths.deallocate()
        self.keys.deallocate()
        self.references.deallocate()
    }

    /// The name at `index` as lookups read it.
    @inline(__always)
    func reference(_ index: Int) -> PathReference { self.references[index] }
}

/// A payload template laid out for rendering (``PayloadTemplate``): its nodes and their children in buffers of
/// trivial values, constant JSON in one byte buffer, and the names and text templates its leaves read in tables,
/// so that rendering counts no reference (see ``TextProgram``).
final class PayloadProgram: @unchecked Sendable {
    /// What a node is.
    enum Kind: UInt8 {
        /// Constant JSON: ``bytes`` at `first`, `second` bytes.
        case constant
        /// A typed leaf: the value of the name at `first` in ``names``.
        case typed
        /// A string leaf with tags: the program at `first` in ``texts``.
        case text
        /// An object or an array between `open` and `close`: the children at `first` in ``children``, `second` of
        /// them.
        case container
    }

    struct Node {
        var kind: Kind
        var open: UInt8 = 0
        var close: UInt8 = 0
        var first = 0
        var second = 0
    }

    /// A child of a container: its prefix (an object member's key and `:`) in ``bytes``, and its node.
    struct Child {
        var prefixStart: Int
        var prefixCount: Int
        var node: Int
    }

    private let nodes: UnsafeMutableBufferPointer<Node>
    private let children: UnsafeMutableBufferPointer<Child>
    private let bytes: UnsafeMutableBufferPointer<UInt8>
    private let names: NameTable
    /// The text leaves' programs, held unretained: ``textPrograms`` keeps them alive.
    private let texts: UnsafeMutableBufferPointer<Unmanaged<TextProgram>>
    private let textPrograms: [TextProgram]

    /// Lays `root` out; the root is node 0.
    init(_ root: PayloadNode) {
        var nodes: [Node] = []
        var children: [Child] = []
        var bytes: [UInt8] = []
        var paths: [TemplatePath] = []
        var texts: [TextProgram] = []
        func layOut(_ node: PayloadNode) -> Int {
            let index = nodes.count
            switch node {
            case .constant(let constant):
                nodes.append(Node(kind: .constant, first: bytes.count, second: constant.count))
                bytes.append(contentsOf: constant)
            case .typed(let path):
                nodes.append(Node(kind: .typed, first: paths.count))
                paths.append(path)
            case .text(let template):
                nodes.append(Node(kind: .text, first: texts.count))
                texts.append(template.program)
            case .container(let open, let close, let members):
                nodes.append(Node(kind: .container, open: open, close: close))
                // The children's nodes first (each with its subtree), then their entries together.
                var laidOut: [Child] = []
                for member in members {
                    let prefixStart = bytes.count
                    bytes.append(contentsOf: member.prefix)
                    laidOut.append(
                        Child(prefixStart: prefixStart, prefixCount: member.prefix.count, node: layOut(member.value)))
                }
                nodes[index].first = children.count
                nodes[index].second = laidOut.count
                children.append(contentsOf: laidOut)
            }
            return index
        }
        _ = layOut(root)
        self.nodes = frozen(nodes)
        self.children = frozen(children)
        self.bytes = frozen(bytes)
        self.names = NameTable(paths)
        self.textPrograms = texts
        self.texts = frozen(texts.map { Unmanaged.passUnretained($0) })
    }

    deinit {
        self.nodes.deallocate()
        self.children.deallocate()
        self.bytes.deallocate()
        self.texts.deallocate()
    }

    /// Renders node `index` into `bytes` (see ``PayloadTemplate/render(into:budget:scope:)``).
    func render(
        _ index: Int, into output: inout [UInt8], budget: inout RenderBudget, scope: inout RenderScope
    ) -> PayloadTemplate.Rendered {
        let node = self.nodes[index]
        switch node.kind {
        case .constant:
            output.append(contentsOf: UnsafeBufferPointer(rebasing: self.bytes[node.first..<node.first + node.second]))
        case .typed:
            guard let value = scope.locate(self.names.reference(node.first)), !scope.isNull(value) else {
                return .leftOut
            }
            scope.serialize(value, into: &output)
        case .text:
            output.append(UInt8(ascii: "\""))
            let stop = self.texts[node.first]._withUnsafeGuaranteedRef { program in
                TextTemplate.render(program, into: &output, escaped: true, budget: &budget, scope: &scope)
            }
            switch stop {
            case nil: output.append(UInt8(ascii: "\""))
            case .missing?: return .leftOut
            case .overBudget?: return .overBudget
            }
        case .container:
            output.append(node.open)
            var first = true
            for child in node.first..<node.first + node.second {
                let entry = self.children[child]
                let mark = output.count
                if !first { output.append(UInt8(ascii: ",")) }
                output.append(
                    contentsOf: UnsafeBufferPointer(
                        rebasing: self.bytes[entry.prefixStart..<entry.prefixStart + entry.prefixCount]))
                switch self.render(entry.node, into: &output, budget: &budget, scope: &scope) {
                case .written: first = false
                case .leftOut: output.removeSubrange(mark...)
                case .overBudget: return .overBudget
                }
            }
            output.append(node.close)
        }
        return output.count > budget.byteLimit ? .overBudget : .written
    }
}
