import APNSCore

/// The names a template sees while it renders: the event's JSON, `_kafka`, `_headers`, and the values of the
/// sections it is inside.
struct RenderScope {
    let event: SourceEvent
    let document: JSONValue
    /// Values of the open sections, innermost last.
    private var frames: [JSONValue] = []

    init(event: SourceEvent, document: JSONValue) {
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
            // Templates see a null header as an empty one (dead letters keep it null).
            guard let name = path.segments.first else {
                return .object(self.event.headers.map { (key: $0.0, value: Self.text($0.1 ?? [])) })
            }
            return self.event.headers.last(where: { $0.0 == name }).map { Self.text($0.1 ?? []) }
        case .scope:
            // Index loops: iterators and slices would retain the arrays and copy each element.
            let segments = path.segments
            var start: JSONValue?
            var frame = self.frames.count
            while frame > 0, start == nil {
                frame -= 1
                start = self.frames[frame].child(named: segments[0])
            }
            guard var current = start ?? self.document.child(named: segments[0]) else { return nil }
            var index = 1
            while index < segments.count {
                guard let next = current.child(named: segments[index]) else { return nil }
                current = next
                index += 1
            }
            return current
        }
    }

    /// ``resolve(_:)``, charging `budget` for the lookup when it is made inside a section, where it may repeat
    /// once per iteration (see ``lookupCost(_:)``). Outside sections a lookup runs once per template, so it
    /// costs nothing and the hot path of a template without sections pays no accounting.
    func resolve(_ path: TemplatePath, charging budget: inout RenderBudget) -> JSONValue? {
        if !self.frames.isEmpty { budget.stepsLeft -= self.lookupCost(path) }
        return self.resolve(path)
    }

    /// What looking `path` up costs, in ``RenderBudget`` steps: one per member of every object searched (each
    /// open section's value from the innermost out, then the event, then each object on the way), one per
    /// header scanned and per 16 bytes of header or key text decoded, and at least one.
    private func lookupCost(_ path: TemplatePath) -> Int {
        switch path.root {
        case .implicit:
            return 1
        case .kafka:
            return 1 + (self.event.source.key?.count ?? 0) >> 4
        case .headers:
            var cost = 1 + self.event.headers.count
            for (name, value) in self.event.headers where path.segments.first.map({ $0 == name }) ?? true {
                cost += (value?.count ?? 0) >> 4
            }
            return cost
        case .scope:
            let first = path.segments[0]
            var cost = 0
            var start: JSONValue?
            for frame in self.frames.reversed() {
                cost += frame.searchCost
                if let value = frame.child(named: first) {
                    start = value
                    break
                }
            }
            if start == nil { cost += self.document.searchCost }
            guard var current = start ?? self.document.child(named: first) else { return cost }
            for segment in path.segments.dropFirst() {
                cost += current.searchCost
                guard let next = current.child(named: segment) else { return cost }
                current = next
            }
            return cost
        }
    }

    private func kafka(_ segments: [String]) -> JSONValue? {
        guard let field = segments.first else {
            return .object([
                (key: "topic", value: .string(self.event.source.topic)),
                (key: "partition", value: .integer(Int64(self.event.source.partition))),
                (key: "offset", value: .integer(self.event.source.offset)),
                (key: "key", value: self.event.source.key.map(Self.text) ?? .null),
                (key: "timestamp", value: self.event.timestampMilliseconds.map(JSONValue.integer) ?? .null),
            ])
        }
        guard segments.count == 1 else { return nil }
        switch field {
        case "topic": return .string(self.event.source.topic)
        case "partition": return .integer(Int64(self.event.source.partition))
        case "offset": return .integer(self.event.source.offset)
        case "key": return self.event.source.key.map(Self.text) ?? .null
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

/// What one rendering may use: the payload of a notification, or one header template (docs/operations.md "Hostile input": no event can
/// make mapping take more than time and memory proportional to its size plus these limits).
///
/// Rendering checks ``byteLimit`` against the running output size after every piece it writes (one
/// comparison, no extra pass) and stops as soon as the output passes it; sections also spend steps
/// (``maximumSteps``), so nested sections over long arrays stop even when they write nothing.
struct RenderBudget {
    /// Rendering stops once its output is longer than this.
    let byteLimit: Int
    /// Steps still allowed; rendering stops when this falls below zero.
    var stepsLeft: Int

    /// Steps one rendering may take: each section iteration is a step, and each name looked up inside a
    /// section costs a step per member of the objects it searches (see
    /// ``RenderScope/resolve(_:charging:)``). A quarter of a million is a few milliseconds of work at most,
    /// and far above what a payload of a few kilobytes can legitimately need.
    static let maximumSteps = 262_144

    /// A budget of `byteLimit` output bytes and ``maximumSteps`` steps.
    init(byteLimit: Int) {
        self.byteLimit = byteLimit
        self.stepsLeft = Self.maximumSteps
    }

    /// Whether the steps are spent.
    var isSpent: Bool { self.stepsLeft < 0 }
}

/// Why a rendering stopped before its end.
enum RenderStop {
    /// A variable named nothing, or `null`: the leaf (or header) is left out.
    case missing(TemplatePath)
    /// The output passed the budget's byte limit, or the steps ran out.
    case overBudget
}

extension JSONValue {
    /// What looking up one name in this value costs, in ``RenderBudget`` steps: objects are searched member
    /// by member, anything else in one step.
    var searchCost: Int {
        if case .object(let members) = self { return max(1, members.count) }
        return 1
    }

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
    /// Renders into `bytes`, JSON-escaping inserted and literal text when `escaped`, within `budget` (its byte
    /// limit counts all of `bytes`, so a payload's leaves share the payload's limit).
    ///
    /// - Returns: `nil`, or why rendering stopped; then `bytes` holds a partial rendering the caller discards.
    func render(
        into bytes: inout [UInt8],
        escaped: Bool,
        budget: inout RenderBudget,
        scope: inout RenderScope
    ) -> RenderStop? {
        Self.render(self.segments, into: &bytes, escaped: escaped, budget: &budget, scope: &scope)
    }

    /// What a header template rendered.
    enum HeaderText {
        /// The whole text.
        case complete(String)
        /// A variable was missing or null.
        case missing(MissingValue)
        /// The text passed `limit` bytes, or the sections ran out of steps; the text so far, cut to `limit`
        /// bytes (a character cut in two becomes U+FFFD).
        case overBudget(String)
    }

    /// Renders to a string (no escaping), at most `limit` bytes of it: for header templates.
    func renderText(limit: Int, scope: inout RenderScope) -> HeaderText {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(64)
        var budget = RenderBudget(byteLimit: limit)
        switch self.render(into: &bytes, escaped: false, budget: &budget, scope: &scope) {
        case nil:
            return .complete(String(decoding: bytes, as: UTF8.self))
        case .missing(let path):
            return .missing(MissingValue(path: path, value: scope.resolve(path)))
        case .overBudget:
            return .overBudget(String(decoding: bytes.prefix(limit), as: UTF8.self))
        }
    }

    private static func render(
        _ segments: [Segment],
        into bytes: inout [UInt8],
        escaped: Bool,
        budget: inout RenderBudget,
        scope: inout RenderScope
    ) -> RenderStop? {
        // By index, not `for segment in segments`: the iterator copied each segment (its references retained
        // and released per segment per event).
        for index in segments.indices {
            switch segments[index] {
            case .text(let raw, let escapedText):
                bytes.append(contentsOf: escaped ? escapedText : raw)
            case .variable(let path):
                let value = scope.resolve(path, charging: &budget)
                if budget.isSpent { return .overBudget }
                guard let value, !value.isNull else { return .missing(path) }
                value.appendText(to: &bytes, escaped: escaped)
            case .section(let path, let inverted, let body):
                let value = scope.resolve(path, charging: &budget) ?? .null
                if budget.isSpent { return .overBudget }
                if inverted {
                    if !value.isTruthy,
                        let stop = Self.render(body, into: &bytes, escaped: escaped, budget: &budget, scope: &scope)
                    {
                        return stop
                    }
                } else if case .array(let elements) = value {
                    for element in elements {
                        if let stop = Self.iterate(body, over: element, &bytes, escaped, &budget, &scope) {
                            return stop
                        }
                    }
                } else if value.isTruthy {
                    if let stop = Self.iterate(body, over: value, &bytes, escaped, &budget, &scope) { return stop }
                }
            }
            if bytes.count > budget.byteLimit { return .overBudget }
        }
        return nil
    }

    /// One section iteration: a step of the budget, then `body` with `value` as the innermost section value.
    private static func iterate(
        _ body: [Segment],
        over value: JSONValue,
        _ bytes: inout [UInt8],
        _ escaped: Bool,
        _ budget: inout RenderBudget,
        _ scope: inout RenderScope
    ) -> RenderStop? {
        budget.stepsLeft -= 1
        if budget.isSpent { return .overBudget }
        return scope.withFrame(value) { scope in
            Self.render(body, into: &bytes, escaped: escaped, budget: &budget, scope: &scope)
        }
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
                JSONText.appendEscaped(string, to: &bytes)
            } else {
                bytes.append(contentsOf: string.utf8)
            }
        case .array, .object:
            let json = self.serialized()
            if escaped {
                json.withUnsafeBufferPointer { JSONText.appendEscaped(utf8: $0, to: &bytes) }
            } else {
                bytes.append(contentsOf: json)
            }
        default:
            // Numbers, booleans and null need no escaping.
            self.serialize(into: &bytes)
        }
    }
}
