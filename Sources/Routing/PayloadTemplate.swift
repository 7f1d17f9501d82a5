/// A payload written as a structured template: the JSON tree of the route's `payload`, with every string leaf
/// compiled as a template and every subtree without templates serialised once, ahead of time; rendered from its
/// ``PayloadProgram``.
struct PayloadTemplate: Sendable {
    /// The compiled tree.
    let root: PayloadNode
    /// The tree laid out for rendering.
    let program: PayloadProgram

    /// Compiles `value`, reporting template errors at `keyPath` and below.
    init(compiling value: JSONValue, keyPath: String, diagnostics: inout RouteDiagnostics) {
        self.init(PayloadNode(compiling: value, keyPath: keyPath, diagnostics: &diagnostics))
    }

    /// A payload of constant JSON bytes.
    init(constant bytes: [UInt8]) {
        self.init(.constant(bytes))
    }

    private init(_ root: PayloadNode) {
        self.root = root
        self.program = PayloadProgram(root)
    }

    /// The event paths the payload may read (see ``TextTemplate/readPaths``).
    var readPaths: [[String]] { self.root.readPaths }

    /// What rendering one value did.
    enum Rendered {
        /// The value is in `bytes`.
        case written
        /// The value is left out (a leaf whose value is missing or null); `bytes` may hold a partial
        /// rendering, which the caller removes.
        case leftOut
        /// `bytes` passed the budget's byte limit, or its steps ran out: rendering stopped there.
        case overBudget
    }

    /// Renders into `bytes`, stopping as soon as `bytes` is longer than the budget's byte limit.
    ///
    /// Objects and arrays are never left out themselves: they drop the members and elements that are, and an
    /// object left empty stays `{}`. The size is compared after every piece written, so the payload's own
    /// size is what counts, including a leaf that is written and then left out by a tag missing further on.
    func render(into bytes: inout [UInt8], budget: inout RenderBudget, scope: inout RenderScope) -> Rendered {
        self.program.render(0, into: &bytes, budget: &budget, scope: &scope)
    }
}

/// A node of a compiled payload template.
enum PayloadNode: Sendable {
    /// JSON bytes that never change.
    case constant([UInt8])
    /// A string leaf that is exactly one tag: the value with its JSON type.
    case typed(TemplatePath)
    /// Any other string leaf with tags: a JSON string.
    case text(TextTemplate)
    /// An object or an array, between its `open` and `close` brackets. Each child is written after its
    /// `prefix`: for an object member, its key as JSON text followed by `:`; for an array element, nothing.
    case container(open: UInt8, close: UInt8, [(prefix: [UInt8], value: PayloadNode)])

    /// Compiles `value`, reporting template errors at `keyPath` and below.
    init(compiling value: JSONValue, keyPath: String, diagnostics: inout RouteDiagnostics) {
        switch value {
        case .string(let source):
            switch TemplateLeaf(compiling: source, at: keyPath, diagnostics: &diagnostics) {
            case nil: self = .constant(value.serialized())
            case .typed(let path)?: self = .typed(path)
            case .constant(let text)?: self = .constant(JSONValue.string(text).serialized())
            case .text(let template)?: self = .text(template)
            }
        case .object(let members):
            let compiled = members.map { member in
                var key: [UInt8] = []
                JSONValue.string(member.key).serialize(into: &key)
                key.append(UInt8(ascii: ":"))
                let child = PayloadNode(
                    compiling: member.value, keyPath: "\(keyPath).\(member.key)", diagnostics: &diagnostics)
                return (prefix: key, value: child)
            }
            self = .container(open: UInt8(ascii: "{"), close: UInt8(ascii: "}"), compiled)
            self.foldConstants()
        case .array(let elements):
            let compiled = elements.enumerated().map { offset, element in
                let child = PayloadNode(
                    compiling: element, keyPath: "\(keyPath)[\(offset)]", diagnostics: &diagnostics)
                return (prefix: [UInt8](), value: child)
            }
            self = .container(open: UInt8(ascii: "["), close: UInt8(ascii: "]"), compiled)
            self.foldConstants()
        default:
            self = .constant(value.serialized())
        }
    }

    /// The event paths the payload may read (see ``TextTemplate/readPaths``).
    var readPaths: [[String]] {
        switch self {
        case .constant: []
        case .typed(let path): path.readPath(insideSection: false).map { [$0] } ?? []
        case .text(let template): template.readPaths
        case .container(_, _, let children): children.flatMap(\.value.readPaths)
        }
    }

    /// Replaces an object or array whose children are all constant by its bytes.
    private mutating func foldConstants() {
        guard case .container(let open, let close, let children) = self else { return }
        var bytes = [open]
        for (offset, child) in children.enumerated() {
            guard case .constant(let value) = child.value else { return }
            if offset > 0 { bytes.append(UInt8(ascii: ",")) }
            bytes.append(contentsOf: child.prefix)
            bytes.append(contentsOf: value)
        }
        bytes.append(close)
        self = .constant(bytes)
    }
}

/// A string leaf of a structured template (a payload's, a route's `context`), compiled: exactly one tag (a typed
/// leaf: the value with its JSON type), text without tags (a constant), or text with tags.
enum TemplateLeaf {
    case typed(TemplatePath)
    case constant(String)
    case text(TextTemplate)

    /// Compiles `source`; `nil` when it does not compile, which is reported at `keyPath`.
    init?(compiling source: String, at keyPath: String, diagnostics: inout RouteDiagnostics) {
        let template: TextTemplate
        do {
            template = try TextTemplate(source)
        } catch {
            diagnostics.report(.brokenTemplate, at: keyPath, error.message, hint: error.hint)
            return nil
        }
        if let path = template.singleTag {
            self = .typed(path)
        } else if let text = template.constantText {
            self = .constant(text)
        } else {
            self = .text(template)
        }
    }
}
