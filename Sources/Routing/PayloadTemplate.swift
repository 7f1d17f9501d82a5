/// A payload written as a structured template: the JSON tree of the route's `payload`, with every string leaf
/// compiled as a template and every subtree without templates serialised once, ahead of time.
indirect enum PayloadTemplate: Sendable {
    /// JSON bytes that never change.
    case constant([UInt8])
    /// A string leaf that is exactly one tag: the value with its JSON type.
    case typed(TemplatePath)
    /// Any other string leaf with tags: a JSON string.
    case text(TextTemplate)
    /// An object; each key is stored as its JSON text followed by `:`.
    case object([(key: [UInt8], value: PayloadTemplate)])
    /// An array.
    case array([PayloadTemplate])

    /// Compiles `value`, reporting template errors at `keyPath` and below.
    init(compiling value: JSONValue, keyPath: String, diagnostics: inout RouteDiagnostics) {
        switch value {
        case .string(let source):
            let template: TextTemplate
            do {
                template = try TextTemplate(source)
            } catch {
                diagnostics.report(.brokenTemplate, at: keyPath, error.message, hint: error.hint)
                self = .constant(value.serialized())
                return
            }
            if let path = template.singleTag {
                self = .typed(path)
            } else if let text = template.constantText {
                self = .constant(JSONValue.string(text).serialized())
            } else {
                self = .text(template)
            }
        case .object(let members):
            let compiled = members.map { member in
                var key: [UInt8] = []
                JSONValue.string(member.key).serialize(into: &key)
                key.append(UInt8(ascii: ":"))
                let child = PayloadTemplate(
                    compiling: member.value, keyPath: "\(keyPath).\(member.key)", diagnostics: &diagnostics)
                return (key: key, value: child)
            }
            self = .object(compiled)
            self.foldConstants()
        case .array(let elements):
            self = .array(
                elements.enumerated().map { offset, element in
                    PayloadTemplate(compiling: element, keyPath: "\(keyPath)[\(offset)]", diagnostics: &diagnostics)
                })
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
        case .object(let members): members.flatMap(\.value.readPaths)
        case .array(let elements): elements.flatMap(\.readPaths)
        }
    }

    /// Replaces an object or array whose children are all constant by its bytes.
    private mutating func foldConstants() {
        var bytes: [UInt8] = []
        switch self {
        case .object(let members):
            bytes.append(UInt8(ascii: "{"))
            for (offset, member) in members.enumerated() {
                guard case .constant(let value) = member.value else { return }
                if offset > 0 { bytes.append(UInt8(ascii: ",")) }
                bytes.append(contentsOf: member.key)
                bytes.append(contentsOf: value)
            }
            bytes.append(UInt8(ascii: "}"))
        case .array(let elements):
            bytes.append(UInt8(ascii: "["))
            for (offset, element) in elements.enumerated() {
                guard case .constant(let value) = element else { return }
                if offset > 0 { bytes.append(UInt8(ascii: ",")) }
                bytes.append(contentsOf: value)
            }
            bytes.append(UInt8(ascii: "]"))
        default:
            return
        }
        self = .constant(bytes)
    }

    /// Renders into `bytes`.
    ///
    /// - Returns: `false` when this value is left out (a leaf whose value is missing or null); `bytes` may then
    ///   hold a partial rendering, which the caller removes. Objects and arrays are never left out themselves:
    ///   they drop the members and elements that are, and an object left empty stays `{}`.
    func render(into bytes: inout [UInt8], scope: inout RenderScope) -> Bool {
        switch self {
        case .constant(let constant):
            bytes.append(contentsOf: constant)
            return true
        case .typed(let path):
            guard let value = scope.resolve(path), !value.isNull else { return false }
            value.serialize(into: &bytes)
            return true
        case .text(let template):
            bytes.append(UInt8(ascii: "\""))
            guard template.render(into: &bytes, escaped: true, scope: &scope) == nil else { return false }
            bytes.append(UInt8(ascii: "\""))
            return true
        case .object(let members):
            bytes.append(UInt8(ascii: "{"))
            var first = true
            for member in members {
                let mark = bytes.count
                if !first { bytes.append(UInt8(ascii: ",")) }
                bytes.append(contentsOf: member.key)
                if member.value.render(into: &bytes, scope: &scope) {
                    first = false
                } else {
                    bytes.removeSubrange(mark...)
                }
            }
            bytes.append(UInt8(ascii: "}"))
            return true
        case .array(let elements):
            bytes.append(UInt8(ascii: "["))
            var first = true
            for element in elements {
                let mark = bytes.count
                if !first { bytes.append(UInt8(ascii: ",")) }
                if element.render(into: &bytes, scope: &scope) {
                    first = false
                } else {
                    bytes.removeSubrange(mark...)
                }
            }
            bytes.append(UInt8(ascii: "]"))
            return true
        }
    }
}
