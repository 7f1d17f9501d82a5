import APNSCore

/// A route's `context` once rendered from one event: the JSON object that every outcome and invalid-token record
/// of the event's notifications carries (and its dead letter, as the header `pushbridge-context`), so that a data
/// team needs no join back to the input topic (docs/data-contract.md, "Context").
///
/// Every entry of the route is in it, in the order written; one whose value is missing, null or larger than
/// ``maximumValueBytes`` is `null` there. Rendering a context never fails and never touches the notification.
package struct RecordContext: Sendable {
    /// One entry as rendered.
    package struct Field: Sendable {
        /// The entry's name (a key of the route's `context`).
        package var name: String
        /// Its value; `nil` when it is `null` in the record.
        package var value: JSONValue?
        /// Why it is `null` (`campaign.id is missing`, `rendered 2048 bytes; …`); `nil` when it has a value or was
        /// written as `null`. `pushbridge render` prints it.
        package var nullReason: String?
    }

    /// The object as it goes into records: compact JSON, members in the route's order.
    package var json: [UInt8]
    /// The entries, in the route's order.
    package var fields: [Field]

    /// The dead letter's header that carries the context object.
    package static let deadLetterHeader = "pushbridge-context"

    /// The most entries a route's `context` may have.
    package static let maximumEntries = 16
    /// The longest entry name, in bytes (letters, digits, `_` and `-`).
    package static let maximumNameBytes = 64
    /// The largest value of one entry, in bytes of its JSON text (a string's quotes and escapes included); a
    /// larger one is `null`. With ``maximumEntries`` and ``maximumNameBytes`` this bounds the whole object to
    /// ``maximumBytes``, whatever the event holds.
    package static let maximumValueBytes = 1024
    /// The largest context object, in bytes: every entry at its largest name and value.
    package static let maximumBytes = 2 + Self.maximumEntries * (Self.maximumNameBytes + Self.maximumValueBytes + 4)

    /// The Kafka key `outcomes.key: context.<name>` takes from this context: a string value's UTF-8 bytes, the
    /// JSON text of any other value, and `nil` (a record without a key) when the entry is `null` or absent.
    package func key(named name: String) -> [UInt8]? {
        guard let field = self.fields.first(where: { $0.name == name }), let value = field.value else { return nil }
        if case .string(let text) = value { return Array(text.utf8) }
        return value.serialized()
    }
}

/// A route's `context`, compiled: each entry a constant, a typed leaf (exactly one tag: the value with its JSON
/// type, as in a payload) or text with tags (a JSON string).
struct ContextTemplate: Sendable {
    enum Value: Sendable {
        case constant(JSONValue)
        case typed(TemplatePath)
        case text(TextTemplate)
    }

    let names: [String]
    let values: [Value]

    /// Compiles `entries` (the route's `context`), reporting every problem at `context` or `context.<name>`;
    /// `nil` when there are none to compile or any problem.
    init?(compiling entries: [(name: String, value: JSONValue)], diagnostics: inout RouteDiagnostics) {
        guard !entries.isEmpty else { return nil }
        let errorsBefore = diagnostics.errors.count
        if entries.count > RecordContext.maximumEntries {
            diagnostics.report(
                .invalidValue, at: "context",
                "context has \(entries.count) entries; a route may have at most \(RecordContext.maximumEntries)",
                hint: "keep the fields a reader of the outcomes needs to group or join by; the rest stays in the "
                    + "input topic")
        }
        var names: [String] = []
        var values: [Value] = []
        for (name, value) in entries {
            let keyPath = "context.\(name)"
            if let problem = Self.problem(withName: name) {
                diagnostics.report(
                    .invalidValue, at: keyPath, problem,
                    hint: "name entries with letters, digits, '_' and '-', e.g. `campaign_id`")
            } else if names.contains(name) {
                diagnostics.report(
                    .invalidValue, at: keyPath, "the name \(name) is used twice", hint: "give every entry its own name")
            }
            names.append(name)
            if let compiled = Self.compile(value, at: keyPath, diagnostics: &diagnostics) {
                values.append(compiled)
            }
        }
        guard diagnostics.errors.count == errorsBefore else { return nil }
        self.names = names
        self.values = values
    }

    private static func problem(withName name: String) -> String? {
        if name.isEmpty { return "an entry has an empty name" }
        if name.utf8.count > RecordContext.maximumNameBytes {
            return "the name is \(name.utf8.count) bytes; at most \(RecordContext.maximumNameBytes)"
        }
        let allowed = name.utf8.allSatisfy { byte in
            (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A)
                || byte == UInt8(ascii: "_") || byte == UInt8(ascii: "-")
        }
        return allowed ? nil : "\(JSONValue.string(name).messageExcerpt) is not a valid context name"
    }

    private static func compile(_ value: JSONValue, at keyPath: String, diagnostics: inout RouteDiagnostics) -> Value? {
        switch value {
        case .string(let source):
            switch TemplateLeaf(compiling: source, at: keyPath, diagnostics: &diagnostics) {
            case nil: return nil
            case .typed(let path)?: return .typed(path)
            case .constant(let text)?: return Self.constant(.string(text), at: keyPath, &diagnostics)
            case .text(let template)?: return .text(template)
            }
        case .array, .object:
            diagnostics.report(
                .invalidValue, at: keyPath,
                "the entry is \(value.typeNameWithArticle); a context entry is one value",
                hint: "write a tag that copies it from the event with its JSON type, e.g. \"{{order.items}}\", or "
                    + "make one entry per field")
            return nil
        default:
            return Self.constant(value, at: keyPath, &diagnostics)
        }
    }

    private static func constant(
        _ value: JSONValue, at keyPath: String, _ diagnostics: inout RouteDiagnostics
    ) -> Value? {
        let size = value.serialized().count
        guard size <= RecordContext.maximumValueBytes else {
            diagnostics.report(
                .invalidValue, at: keyPath,
                "the value is \(size) bytes as JSON; a context entry is at most \(RecordContext.maximumValueBytes)",
                hint: "shorten it")
            return nil
        }
        return .constant(value)
    }

    /// The event paths the context may read (see ``TextTemplate/readPaths``).
    var readPaths: [[String]] {
        self.values.flatMap { value -> [[String]] in
            switch value {
            case .constant: []
            case .typed(let path): path.readPath(insideSection: false).map { [$0] } ?? []
            case .text(let template): template.readPaths
            }
        }
    }

    /// The context of the event in `scope`. An entry whose value is missing, null, or larger than
    /// ``RecordContext/maximumValueBytes`` as JSON (also a text whose sections ran out of steps) is `null`.
    func render(_ scope: inout RenderScope) -> RecordContext {
        var json: [UInt8] = [UInt8(ascii: "{")]
        json.reserveCapacity(16 + 48 * self.names.count)
        var fields: [RecordContext.Field] = []
        fields.reserveCapacity(self.names.count)
        var scratch: [UInt8] = []
        for index in self.names.indices {
            if index > 0 { json.append(UInt8(ascii: ",")) }
            JSONText.appendQuoted(self.names[index], to: &json)
            json.append(UInt8(ascii: ":"))
            var field = RecordContext.Field(name: self.names[index])
            (field.value, field.nullReason) = Self.value(self.values[index], &scope)
            if let value = field.value {
                scratch.removeAll(keepingCapacity: true)
                value.serialize(into: &scratch)
                if scratch.count > RecordContext.maximumValueBytes {
                    field.value = nil
                    field.nullReason = Self.tooLarge("\(scratch.count) bytes")
                }
            }
            if field.value == nil { json.append(contentsOf: "null".utf8) } else { json.append(contentsOf: scratch) }
            fields.append(field)
        }
        json.append(UInt8(ascii: "}"))
        return RecordContext(json: json, fields: fields)
    }

    private static func tooLarge(_ size: String) -> String {
        "rendered \(size) as JSON; a context entry is at most \(RecordContext.maximumValueBytes)"
    }

    /// An entry's value before the size check, or why it is `null`.
    private static func value(_ value: Value, _ scope: inout RenderScope) -> (JSONValue?, String?) {
        switch value {
        case .constant(let constant):
            return (constant.isNull ? nil : constant, nil)
        case .typed(let path):
            switch scope.resolve(path) {
            case nil: return (nil, "\(path.text) is missing")
            case .null?: return (nil, "\(path.text) is null")
            case .string(let text)? where text.utf8.count > RecordContext.maximumValueBytes:
                // Too large whatever its escapes: no need to write it out to know.
                return (nil, Self.tooLarge("more than \(RecordContext.maximumValueBytes) bytes"))
            case let found?: return (found, nil)
            }
        case .text(let template):
            switch template.renderText(limit: RecordContext.maximumValueBytes, scope: &scope) {
            case .complete(let text): return (.string(text), nil)
            case .missing(let missing): return (nil, missing.description)
            case .overBudget:
                return (nil, Self.tooLarge("more than \(RecordContext.maximumValueBytes) bytes"))
            }
        }
    }
}

extension RecordContext.Field {
    fileprivate init(name: String) {
        self.init(name: name, value: nil, nullReason: nil)
    }
}
