/// The names a template sees while it renders: the event's JSON, `_kafka`, `_headers`, and the values of the
/// sections it is inside.
struct RenderScope {
    let event: RoutingEvent
    let document: JSONValue
    /// Values of the open sections, innermost last.
    private var frames: [JSONValue] = []

    init(event: RoutingEvent, document: JSONValue) {
        self.event = event
        self.document = document
    }

    /// The value `path` names, `nil` when it names nothing.
    ///
    /// The first segment is looked up in the innermost open section first, then outwards, then in the event
    /// (Mustache's rule); the rest follows from there. `_kafka` and `_headers` always name the event's metadata.
    func resolve(_ path: TemplatePath) -> JSONValue? {
        switch path.root {
        case .implicit:
            return self.frames.last ?? self.document
        case .kafka:
            return self.kafka(path.segments)
        case .headers:
            guard let name = path.segments.first else {
                return .object(self.event.headers.map { (key: $0.name, value: Self.text($0.value)) })
            }
            return self.event.headers.last(where: { $0.name == name }).map { Self.text($0.value) }
        case .scope:
            let first = path.segments[0]
            var start: JSONValue?
            for frame in self.frames.reversed() {
                if let value = frame.child(named: first) {
                    start = value
                    break
                }
            }
            guard var current = start ?? self.document.child(named: first) else { return nil }
            for segment in path.segments.dropFirst() {
                guard let next = current.child(named: segment) else { return nil }
                current = next
            }
            return current
        }
    }

    private func kafka(_ segments: [String]) -> JSONValue? {
        guard let field = segments.first else {
            return .object([
                (key: "topic", value: .string(self.event.topic)),
                (key: "partition", value: .integer(Int64(self.event.partition))),
                (key: "offset", value: .integer(self.event.offset)),
                (key: "key", value: self.event.key.map(Self.text) ?? .null),
                (key: "timestamp", value: self.event.timestampMilliseconds.map(JSONValue.integer) ?? .null),
            ])
        }
        guard segments.count == 1 else { return nil }
        switch field {
        case "topic": return .string(self.event.topic)
        case "partition": return .integer(Int64(self.event.partition))
        case "offset": return .integer(self.event.offset)
        case "key": return self.event.key.map(Self.text) ?? .null
        case "timestamp": return self.event.timestampMilliseconds.map(JSONValue.integer) ?? .null
        default: return nil
        }
    }

    private static func text(_ bytes: [UInt8]) -> JSONValue {
        .string(String(decoding: bytes, as: UTF8.self))
    }

    /// Runs `body` with `value` as the innermost section value.
    mutating func withFrame<T>(_ value: JSONValue, _ body: (inout RenderScope) -> T) -> T {
        self.frames.append(value)
        defer { self.frames.removeLast() }
        return body(&self)
    }
}

extension JSONValue {
    /// Whether a section over this value renders: everything but `null`, `false` and `[]` does.
    var isTruthy: Bool {
        switch self {
        case .null, .bool(false): false
        case .array(let elements): !elements.isEmpty
        default: true
        }
    }
}

extension TextTemplate {
    /// Renders into `bytes`, JSON-escaping inserted and literal text when `escaped`.
    ///
    /// - Returns: `nil`, or the path of the first variable that was missing or null; then `bytes` holds a
    ///   partial rendering the caller discards.
    func render(into bytes: inout [UInt8], escaped: Bool, scope: inout RenderScope) -> TemplatePath? {
        Self.render(self.segments, into: &bytes, escaped: escaped, scope: &scope)
    }

    /// Renders to a string (no escaping): for header templates. `.failure` carries the missing path.
    func renderText(scope: inout RenderScope) -> Result<String, MissingValue> {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(64)
        if let missing = self.render(into: &bytes, escaped: false, scope: &scope) {
            return .failure(MissingValue(path: missing, value: scope.resolve(missing)))
        }
        return .success(String(decoding: bytes, as: UTF8.self))
    }

    private static func render(
        _ segments: [Segment],
        into bytes: inout [UInt8],
        escaped: Bool,
        scope: inout RenderScope
    ) -> TemplatePath? {
        for segment in segments {
            switch segment {
            case .text(let raw, let escapedText):
                bytes.append(contentsOf: escaped ? escapedText : raw)
            case .variable(let path):
                guard let value = scope.resolve(path), !value.isNull else { return path }
                value.appendText(to: &bytes, escaped: escaped)
            case .section(let path, let inverted, let body):
                let value = scope.resolve(path) ?? .null
                if inverted {
                    if !value.isTruthy, let missing = Self.render(body, into: &bytes, escaped: escaped, scope: &scope) {
                        return missing
                    }
                    continue
                }
                guard value.isTruthy else { continue }
                let elements: [JSONValue]
                if case .array(let array) = value { elements = array } else { elements = [value] }
                for element in elements {
                    let missing = scope.withFrame(element) { scope in
                        Self.render(body, into: &bytes, escaped: escaped, scope: &scope)
                    }
                    if let missing { return missing }
                }
            }
        }
        return nil
    }
}

/// A variable a template needed that the event does not have (or has as `null`).
struct MissingValue: Error {
    var path: TemplatePath
    /// `.null` when present but null; `nil` when absent.
    var value: JSONValue?

    /// `order.id is missing`, `order.id is null`.
    var description: String {
        self.value == nil ? "\(self.path.text) is missing" : "\(self.path.text) is null"
    }
}

extension JSONValue {
    /// Appends this value as text inside a template: strings as they are, numbers and booleans as JSON writes
    /// them, arrays and objects as compact JSON text.
    func appendText(to bytes: inout [UInt8], escaped: Bool) {
        switch self {
        case .string(let string):
            if escaped {
                JSONValue.appendEscaped(string, to: &bytes)
            } else {
                bytes.append(contentsOf: string.utf8)
            }
        case .array, .object:
            let json = self.serialized()
            if escaped {
                json.withUnsafeBufferPointer { JSONValue.appendEscaped(utf8: $0, to: &bytes) }
            } else {
                bytes.append(contentsOf: json)
            }
        default:
            // Numbers, booleans and null need no escaping.
            self.serialize(into: &bytes)
        }
    }
}
