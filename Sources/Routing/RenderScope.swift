import APNSCore

/// A value a template sees: a node of the event's document, or a value made for the template (`_kafka`,
/// `_headers`).
enum ScopeValue {
    case node(Int)
    case made(JSONValue)
}

/// The names a template sees while it renders: the event's JSON, `_kafka`, `_headers`, and the values of the
/// sections it is inside.
///
/// Lookups answer where a value is (``locate(_:)``), not a copy of it: the event's values stay on its
/// ``JSONDocument`` tape, and rendering writes them from there. ``resolve(_:)`` builds the ``JSONValue`` for
/// the callers that inspect one (tokens, expiration, channel ID, context, messages).
struct RenderScope {
    let event: SourceEvent
    let document: JSONDocument
    /// Values of the open sections, innermost last.
    private var frames: [ScopeValue] = []

    /// The document's tape; `self` keeps the document alive while it is read.
    var tape: JSONTape { self.document.tape }

    init(event: SourceEvent, document: JSONDocument) {
        self.event = event
        self.document = document
    }

    /// The value `path` names, `nil` when it names nothing.
    ///
    /// The first segment is looked up in the innermost open section first, then outwards, then in the event
    /// (Mustache's rule); the rest follows from there. `_kafka` and `_headers` always name the event's metadata.
    func locate(_ path: TemplatePath) -> ScopeValue? {
        path.withReference { self.locate($0) }
    }

    /// ``locate(_:)-(TemplatePath)`` for a name as a program holds it.
    func locate(_ reference: PathReference) -> ScopeValue? {
        switch reference.root {
        case .implicit:
            return self.frames.last ?? .node(JSONTape.root)
        case .kafka:
            return self.kafka(reference.path.pointee.segments).map(ScopeValue.made)
        case .headers:
            // Templates see a null header as an empty one (dead letters keep it null).
            guard let name = reference.path.pointee.segments.first else {
                return .made(.object(self.event.headers.map { (key: $0.0, value: Self.text($0.1 ?? [])) }))
            }
            return self.event.headers.last(where: { $0.0 == name }).map { .made(Self.text($0.1 ?? [])) }
        case .scope:
            // Index loops: iterators and slices would retain the arrays and copy each element.
            var start: ScopeValue?
            var frame = self.frames.count
            while frame > 0, start == nil {
                frame -= 1
                start = self.child(of: self.frames[frame], reference, 0)
            }
            guard var current = start ?? self.child(of: .node(JSONTape.root), reference, 0) else { return nil }
            var position = 1
            while position < reference.keys.count {
                guard let next = self.child(of: current, reference, position) else { return nil }
                current = next
                position += 1
            }
            return current
        }
    }

    /// The value `path` names as a ``JSONValue``, `nil` when it names nothing.
    func resolve(_ path: TemplatePath) -> JSONValue? {
        guard let located = self.locate(path) else { return nil }
        return self.value(located)
    }

    /// ``locate(_:)``, charging `budget` for the lookup when it is made inside a section, where it may repeat
    /// once per iteration (see ``lookupCost(_:)``). Outside sections a lookup runs once per template, so it
    /// costs nothing and the hot path of a template without sections pays no accounting.
    func locate(_ reference: PathReference, charging budget: inout RenderBudget) -> ScopeValue? {
        if !self.frames.isEmpty { budget.stepsLeft -= self.lookupCost(reference) }
        return self.locate(reference)
    }

    /// Whether `path` names a value equal to `value` (``JSONValue``'s type-exact equality).
    func value(at path: TemplatePath, equals value: JSONValue) -> Bool {
        switch self.locate(path) {
        case nil: false
        case .node(let index)?: self.tape.value(index, equals: value)
        case .made(let made)?: made == value
        }
    }

    /// `value` as a ``JSONValue``.
    func value(_ value: ScopeValue) -> JSONValue {
        switch value {
        case .node(let index): self.tape.value(index)
        case .made(let made): made
        }
    }

    /// One step of the name `reference` from `value`, by its segment at `position`.
    private func child(of value: ScopeValue, _ reference: PathReference, _ position: Int) -> ScopeValue? {
        switch value {
        case .node(let index):
            self.tape.child(
                of: index, key: reference.keys[position], segment: reference.path.pointee.segments[position]
            ).map(ScopeValue.node)
        case .made(let made):
            made.child(named: reference.path.pointee.segments[position]).map(ScopeValue.made)
        }
    }

    /// What one step of a path from `value` costs, in ``RenderBudget`` steps: an object is searched member by
    /// member, an array of the document walked to the element, anything else looked at once.
    private func stepCost(_ value: ScopeValue, _ key: SegmentKey) -> Int {
        switch value {
        case .node(let index):
            let node = self.tape.node(index)
            switch node.kind {
            case .object: return max(1, node.count)
            case .array: return 1 + min(node.count, max(0, key.index ?? 0))
            default: return 1
            }
        case .made(let made):
            return made.searchCost
        }
    }

    /// What looking `path` up costs, in ``RenderBudget`` steps: one per member of every object searched (each
    /// open section's value from the innermost out, then the event, then each object on the way) and per array
    /// element walked past, one per header scanned and per 16 bytes of header or key text decoded, and at least
    /// one.
    private func lookupCost(_ reference: PathReference) -> Int {
        switch reference.root {
        case .implicit:
            return 1
        case .kafka:
            return 1 + (self.event.source.key?.count ?? 0) >> 4
        case .headers:
            let name = reference.path.pointee.segments.first
            var cost = 1 + self.event.headers.count
            for (header, value) in self.event.headers where name.map({ $0 == header }) ?? true {
                cost += (value?.count ?? 0) >> 4
            }
            return cost
        case .scope:
            let keys = reference.keys
            var cost = 0
            var start: ScopeValue?
            for frame in self.frames.reversed() {
                cost += self.stepCost(frame, keys[0])
                if let value = self.child(of: frame, reference, 0) {
                    start = value
                    break
                }
            }
            let root = ScopeValue.node(JSONTape.root)
            if start == nil { cost += self.stepCost(root, keys[0]) }
            guard var current = start ?? self.child(of: root, reference, 0) else { return cost }
            for position in keys.indices.dropFirst() {
                cost += self.stepCost(current, keys[position])
                guard let next = self.child(of: current, reference, position) else { return cost }
                current = next
            }
            return cost
        }
    }

    /// Whether `value` is `null`.
    func isNull(_ value: ScopeValue) -> Bool {
        switch value {
        case .node(let index): self.tape.node(index).kind == .null
        case .made(let made): made.isNull
        }
    }

    /// Whether `value` is an object.
    func isObject(_ value: ScopeValue) -> Bool {
        switch value {
        case .node(let index): self.tape.node(index).kind == .object
        case .made(.object): true
        case .made: false
        }
    }

    /// Whether a section over `value` renders: everything but `null`, `false` and `[]` does.
    func isTruthy(_ value: ScopeValue) -> Bool {
        switch value {
        case .node(let index):
            let node = self.tape.node(index)
            switch node.kind {
            case .null, .false: return false
            case .array: return node.count > 0
            default: return true
            }
        case .made(let made):
            return made.isTruthy
        }
    }

    /// Appends `value` as compact JSON.
    func serialize(_ value: ScopeValue, into bytes: inout [UInt8]) {
        switch value {
        case .node(let index): self.tape.serialize(index, into: &bytes)
        case .made(let made): made.serialize(into: &bytes)
        }
    }

    /// Appends `value` as text inside a template: strings as they are, numbers and booleans as JSON writes them,
    /// arrays and objects as compact JSON text (see ``JSONValue/appendText(to:escaped:)``).
    func appendText(_ value: ScopeValue, to bytes: inout [UInt8], escaped: Bool) {
        guard case .node(let index) = value else {
            self.value(value).appendText(to: &bytes, escaped: escaped)
            return
        }
        switch self.tape.node(index).kind {
        case .string:
            let text = self.tape.string(index)
            if escaped {
                JSONText.appendEscaped(utf8: text, to: &bytes)
            } else {
                bytes.append(contentsOf: text)
            }
        case .array, .object:
            var json: [UInt8] = []
            self.tape.serialize(index, into: &json)
            if escaped {
                json.withUnsafeBufferPointer { JSONText.appendEscaped(utf8: $0, to: &bytes) }
            } else {
                bytes.append(contentsOf: json)
            }
        default:
            // Numbers, booleans and null need no escaping.
            self.tape.serialize(index, into: &bytes)
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
    mutating func withFrame<T>(_ value: ScopeValue, _ body: (inout RenderScope) -> T) -> T {
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
        Self.render(self.program, into: &bytes, escaped: escaped, budget: &budget, scope: &scope)
    }

    /// Renders `program` (a template's ``program``).
    static func render(
        _ program: TextProgram,
        into bytes: inout [UInt8],
        escaped: Bool,
        budget: inout RenderBudget,
        scope: inout RenderScope
    ) -> RenderStop? {
        Self.run(program, 0..<program.operations.count, into: &bytes, escaped: escaped, budget: &budget, scope: &scope)
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

    /// Runs the operations of `program` in `range`.
    private static func run(
        _ program: TextProgram,
        _ range: Range<Int>,
        into bytes: inout [UInt8],
        escaped: Bool,
        budget: inout RenderBudget,
        scope: inout RenderScope
    ) -> RenderStop? {
        var index = range.lowerBound
        while index < range.upperBound {
            let operation = program.operations[index]
            switch operation.kind {
            case .text:
                bytes.append(contentsOf: program.text(index, escaped: escaped))
                index += 1
            case .variable:
                let value = scope.locate(program.names.reference(operation.first), charging: &budget)
                if budget.isSpent { return .overBudget }
                guard let value, !scope.isNull(value) else { return .missing(program.names.paths[operation.first]) }
                scope.appendText(value, to: &bytes, escaped: escaped)
                index += 1
            case .section:
                let body = index + 1..<operation.second
                let value = scope.locate(program.names.reference(operation.first), charging: &budget) ?? .made(.null)
                if budget.isSpent { return .overBudget }
                if operation.inverted {
                    if !scope.isTruthy(value),
                        let stop = Self.run(
                            program, body, into: &bytes, escaped: escaped, budget: &budget, scope: &scope)
                    {
                        return stop
                    }
                } else if case .node(let array) = value, scope.tape.node(array).kind == .array {
                    // The elements one after the other on the tape: each one's subtree ends where the next starts.
                    let end = Int(scope.tape.node(array).end)
                    var element = array + 1
                    while element < end {
                        if let stop = Self.iterate(
                            program, body, over: .node(element), &bytes, escaped, &budget, &scope)
                        {
                            return stop
                        }
                        element = Int(scope.tape.node(element).end)
                    }
                } else if case .made(.array(let elements)) = value {
                    for element in elements {
                        if let stop = Self.iterate(
                            program, body, over: .made(element), &bytes, escaped, &budget, &scope)
                        {
                            return stop
                        }
                    }
                } else if scope.isTruthy(value) {
                    if let stop = Self.iterate(program, body, over: value, &bytes, escaped, &budget, &scope) {
                        return stop
                    }
                }
                index = operation.second
            }
            if bytes.count > budget.byteLimit { return .overBudget }
        }
        return nil
    }

    /// One section iteration: a step of the budget, then the operations of `body` with `value` as the innermost
    /// section value.
    private static func iterate(
        _ program: TextProgram,
        _ body: Range<Int>,
        over value: ScopeValue,
        _ bytes: inout [UInt8],
        _ escaped: Bool,
        _ budget: inout RenderBudget,
        _ scope: inout RenderScope
    ) -> RenderStop? {
        budget.stepsLeft -= 1
        if budget.isSpent { return .overBudget }
        return scope.withFrame(value) { scope in
            Self.run(program, body, into: &bytes, escaped: escaped, budget: &budget, scope: &scope)
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
