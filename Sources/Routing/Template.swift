import APNSCore
import Mustache

/// A dotted name in a template tag or a route field (`order.id`, `_kafka.offset`, `.`), split once.
struct TemplatePath: Sendable, Hashable {
    /// Where the first segment is looked up.
    enum Root: Sendable, Hashable {
        /// In the open sections (innermost first), then in the event's JSON.
        case scope
        /// `.`: the innermost open section's value, or the event's JSON.
        case implicit
        /// `_kafka` or `_kafka.<field>`: the event's coordinates.
        case kafka
        /// `_headers` or `_headers.<name>`: the event's headers (`<name>` may itself contain dots).
        case headers
    }

    /// The path as written.
    let text: String
    let root: Root
    /// The segments after the root (for `.scope`, all of them).
    let segments: [String]
    /// ``segments`` as the tape compares them (``SegmentKey``).
    let keys: [SegmentKey]

    /// Parses `text`; `nil` when it has an empty segment (`a..b`, `.a`, `a.`).
    init?(_ text: String) {
        self.text = text
        if text == "." {
            self.root = .implicit
            self.segments = []
            self.keys = []
            return
        }
        let parts = text.split(separator: ".", omittingEmptySubsequences: false)
        guard !parts.contains(where: \.isEmpty) else { return nil }
        switch parts[0] {
        case "_kafka":
            self.root = .kafka
            self.segments = parts.dropFirst().map(String.init)
        case "_headers":
            self.root = .headers
            // Header names may contain dots: everything after `_headers.` is the name.
            self.segments = parts.count > 1 ? [parts.dropFirst().joined(separator: ".")] : []
        default:
            self.root = .scope
            self.segments = parts.map(String.init)
        }
        self.keys = self.segments.map(SegmentKey.init)
    }
}

/// A path segment as a ``JSONTape`` compares it with member names: its length and, for names of up to 16 UTF-8
/// bytes (nearly all), the bytes themselves in two words, so that a lookup reads no string and counts no
/// reference; and its value when it is a decimal array index.
struct SegmentKey: Sendable, Hashable {
    /// The name's length in UTF-8 bytes.
    let count: Int
    /// The first 16 bytes, zero-padded, in memory order.
    let words: (UInt64, UInt64)
    /// The segment as an array index, when it is one (`Int(segment)`).
    let index: Int?

    /// The longest name held in ``words``.
    static let inlineBytes = 16

    init(_ segment: String) {
        self.count = segment.utf8.count
        var words: (UInt64, UInt64) = (0, 0)
        withUnsafeMutableBytes(of: &words) { raw in
            for (offset, byte) in segment.utf8.prefix(Self.inlineBytes).enumerated() { raw[offset] = byte }
        }
        self.words = words
        self.index = Int(segment)
    }

    /// Whether `name` (UTF-8) is this segment; `segment` is the whole text, read only for names longer than
    /// ``inlineBytes``.
    @inline(__always)
    func matches(_ name: UnsafeBufferPointer<UInt8>, segment: @autoclosure () -> String) -> Bool {
        guard name.count == self.count else { return false }
        guard self.count <= Self.inlineBytes else { return segment().utf8.elementsEqual(name) }
        var words: (UInt64, UInt64) = (0, 0)
        withUnsafeMutableBytes(of: &words) { raw in
            raw.copyMemory(from: UnsafeRawBufferPointer(name))
        }
        return words.0 == self.words.0 && words.1 == self.words.1
    }

    static func == (lhs: SegmentKey, rhs: SegmentKey) -> Bool {
        lhs.count == rhs.count && lhs.words.0 == rhs.words.0 && lhs.words.1 == rhs.words.1 && lhs.index == rhs.index
    }

    func hash(into hasher: inout Hasher) {
        hasher.combine(self.count)
        hasher.combine(self.words.0)
        hasher.combine(self.words.1)
    }
}

/// A template that renders text: the value of a string leaf, `device_tokens`, `expiration`, `collapse_id`.
///
/// Parsed once at compile time. The Mustache subset is variables (`{{a.b}}`, `{{{a.b}}}`, `{{& a.b}}` all mean
/// the same, since inserted text is escaped for JSON and never for HTML), sections and inverted sections, and
/// comments. Partials, blocks, pragmas, delimiter changes and transforms are rejected at compile time.
struct TextTemplate: Sendable {
    /// A piece of a template.
    enum Segment: Sendable {
        /// Literal text: its raw UTF-8 and its JSON-escaped form.
        case text(raw: [UInt8], escaped: [UInt8])
        /// A variable tag.
        case variable(TemplatePath)
        /// `{{#path}}...{{/path}}` (or `{{^path}}...{{/path}}` when `inverted`).
        case section(TemplatePath, inverted: Bool, [Segment])
    }

    /// The template as written.
    let source: String
    let segments: [Segment]
    /// ``segments`` laid out for rendering.
    let program: TextProgram

    /// The path when the whole template is exactly one variable tag (a typed leaf).
    var singleTag: TemplatePath? {
        if self.segments.count == 1, case .variable(let path) = self.segments[0] { return path }
        return nil
    }

    /// Whether the template has any tag at all (other than comments).
    var hasTags: Bool {
        self.segments.contains {
            if case .text = $0 { return false }
            return true
        }
    }

    /// The text, when the template has no tags.
    var constantText: String? {
        self.hasTags
            ? nil
            : self.segments.reduce(into: "") { text, segment in
                if case .text(let raw, _) = segment { text += String(decoding: raw, as: UTF8.self) }
            }
    }

    /// Why a template does not compile: the message and, when useful, a hint.
    struct SyntaxError: Error {
        var message: String
        var hint: String?
    }

    /// The empty template, which renders nothing.
    static let empty = TextTemplate(source: "", segments: [])

    private init(source: String, segments: [Segment]) {
        self.source = source
        self.segments = segments
        self.program = TextProgram(segments)
    }

    /// Parses `source`: first with swift-mustache, whose parser defines the syntax and locates errors, then
    /// into this type's segments.
    init(_ source: String) throws(SyntaxError) {
        // Both parsers recurse once per open section: refuse a pathological nesting before either runs.
        if Self.sectionOpeningsBound(Array(source.utf8)) > Self.maximumSectionDepth {
            throw SyntaxError(
                message: "broken template: sections nested deeper than \(Self.maximumSectionDepth) levels",
                hint: "flatten the template; sections rarely need more than two or three levels")
        }
        do {
            _ = try MustacheTemplate(string: source)
        } catch let error as MustacheTemplate.ParserError {
            throw Self.describe(error)
        } catch {
            throw SyntaxError(message: "broken template: \(error)", hint: nil)
        }
        self.source = source
        var scanner = TagScanner(Array(source.utf8))
        self.segments = try scanner.parse(closing: nil)
        self.program = TextProgram(self.segments)
    }

    /// How deep sections may nest in a template.
    static let maximumSectionDepth = 32

    /// An upper bound of the section nesting depth of `bytes`: the deepest running count of `{{#` and `{{^`
    /// openings less `{{/` closings (tags inside other tags' names cannot occur in a template that parses).
    private static func sectionOpeningsBound(_ bytes: [UInt8]) -> Int {
        var depth = 0
        var deepest = 0
        var index = 0
        while index + 2 < bytes.count {
            if bytes[index] == UInt8(ascii: "{"), bytes[index + 1] == UInt8(ascii: "{") {
                switch bytes[index + 2] {
                case UInt8(ascii: "#"), UInt8(ascii: "^"):
                    depth += 1
                    deepest = max(deepest, depth)
                case UInt8(ascii: "/"):
                    depth -= 1
                default:
                    break
                }
                index += 2
            } else {
                index += 1
            }
        }
        return deepest
    }

    private static func describe(_ error: MustacheTemplate.ParserError) -> SyntaxError {
        let position = "line \(error.context.lineNumber), column \(error.context.columnNumber)"
        let (what, hint): (String, String?) =
            switch error.error as? MustacheTemplate.Error {
            case .sectionCloseNameIncorrect?:
                ("a section is closed with another name than it was opened with", "close {{#name}} with {{/name}}")
            case .unfinishedName?:
                (
                    "a tag is not closed, or its name has characters other than letters, digits, '.', '-', '_'",
                    "write tags as {{name}} or {{a.b.c}}; to show literal braces, take them from the event's data"
                )
            case .expectedSectionEnd?:
                ("a section is never closed", "close every {{#name}} or {{^name}} with {{/name}}")
            case .invalidSetDelimiter?:
                ("a delimiter change ({{=...=}}) is malformed", "routes do not support changing delimiters")
            case .invalidConfigVariableSyntax?, .unrecognisedConfigVariable?:
                ("a pragma ({{%...}}) is malformed", "routes do not support pragmas")
            case .some(let other):
                ("\(other)", nil)
            case nil:
                // The only other error swift-mustache's parser throws is running out of input inside a tag.
                ("the template ends inside a tag", "close every {{ with }}")
            }
        return SyntaxError(message: "broken template at \(position): \(what)", hint: hint)
    }
}

/// Splits template bytes into segments. Runs only on templates swift-mustache has accepted, so it mainly
/// sorts tags by kind and rejects the Mustache features routes do not support.
private struct TagScanner {
    private let bytes: [UInt8]
    private var index = 0

    init(_ bytes: [UInt8]) {
        self.bytes = bytes
    }

    private func hasPrefix(_ prefix: StaticString, at position: Int) -> Bool {
        let count = prefix.utf8CodeUnitCount
        guard self.bytes.count - position >= count else { return false }
        for offset in 0..<count where self.bytes[position + offset] != prefix.utf8Start[offset] {
            return false
        }
        return true
    }

    private func find(_ needle: StaticString, from position: Int) -> Int? {
        var candidate = position
        while candidate < self.bytes.count {
            if self.hasPrefix(needle, at: candidate) { return candidate }
            candidate += 1
        }
        return nil
    }

    /// Parses segments until the end, or until `{{/closing}}` when `closing` is given.
    mutating func parse(closing: String?) throws(TextTemplate.SyntaxError) -> [TextTemplate.Segment] {
        var segments: [TextTemplate.Segment] = []
        var text: [UInt8] = []
        func flush() {
            guard !text.isEmpty else { return }
            var escaped: [UInt8] = []
            text.withUnsafeBufferPointer { JSONText.appendEscaped(utf8: $0, to: &escaped) }
            segments.append(.text(raw: text, escaped: escaped))
            text = []
        }
        while self.index < self.bytes.count {
            guard self.hasPrefix("{{", at: self.index) else {
                text.append(self.bytes[self.index])
                self.index += 1
                continue
            }
            flush()
            if self.hasPrefix("{{{", at: self.index) {
                guard let end = self.find("}}}", from: self.index + 3) else { throw Self.unclosedTag }
                let name = self.name(from: self.index + 3, to: end)
                self.index = end + 3
                segments.append(.variable(try Self.path(name)))
                continue
            }
            guard let end = self.find("}}", from: self.index + 2) else { throw Self.unclosedTag }
            let start = self.index + 2
            self.index = end + 2
            guard start < end else { throw Self.path(invalid: "") }
            let sigil = self.bytes[start]
            switch sigil {
            case UInt8(ascii: "!"):
                continue
            case UInt8(ascii: "#"), UInt8(ascii: "^"):
                let name = self.name(from: start + 1, to: end)
                let path = try Self.path(name)
                let body = try self.parse(closing: name)
                segments.append(.section(path, inverted: sigil == UInt8(ascii: "^"), body))
            case UInt8(ascii: "/"):
                let name = self.name(from: start + 1, to: end)
                guard name == closing else {
                    throw TextTemplate.SyntaxError(
                        message: "broken template: {{/\(name)}} closes no open section",
                        hint: "close {{#name}} with {{/name}}")
                }
                return segments
            case UInt8(ascii: "&"):
                segments.append(.variable(try Self.path(self.name(from: start + 1, to: end))))
            case UInt8(ascii: ">"), UInt8(ascii: "<"), UInt8(ascii: "$"):
                throw TextTemplate.SyntaxError(
                    message: "partials and blocks ({{>...}}, {{<...}}, {{$...}}) are not supported in routes",
                    hint: "write the text into the template itself")
            case UInt8(ascii: "="):
                throw TextTemplate.SyntaxError(
                    message: "changing delimiters ({{=...=}}) is not supported in routes",
                    hint: "routes always use {{ and }}")
            case UInt8(ascii: "%"):
                throw TextTemplate.SyntaxError(
                    message: "pragmas ({{%...}}) are not supported in routes",
                    hint: "inserted text is always JSON-escaped; no content type applies")
            default:
                segments.append(.variable(try Self.path(self.name(from: start, to: end))))
            }
        }
        flush()
        if let closing {
            throw TextTemplate.SyntaxError(
                message: "broken template: section {{#\(closing)}} is never closed", hint: "add {{/\(closing)}}")
        }
        return segments
    }

    private func name(from start: Int, to end: Int) -> String {
        var lower = start
        var upper = end
        while lower < upper, Self.isWhitespace(self.bytes[lower]) { lower += 1 }
        while upper > lower, Self.isWhitespace(self.bytes[upper - 1]) { upper -= 1 }
        return String(decoding: self.bytes[lower..<upper], as: UTF8.self)
    }

    private static func isWhitespace(_ byte: UInt8) -> Bool {
        byte == 0x20 || byte == 0x09 || byte == 0x0A || byte == 0x0D
    }

    private static let unclosedTag = TextTemplate.SyntaxError(
        message: "broken template: a tag is never closed", hint: "close every {{ with }}")

    private static func path(_ name: String) throws(TextTemplate.SyntaxError) -> TemplatePath {
        if name.contains("(") {
            throw TextTemplate.SyntaxError(
                message: "transforms ({{\(name)}}) are not supported in routes",
                hint: "reference the value itself: {{a.b}}")
        }
        guard let path = TemplatePath(name) else { throw Self.path(invalid: name) }
        return path
    }

    private static func path(invalid name: String) -> TextTemplate.SyntaxError {
        TextTemplate.SyntaxError(
            message: "broken template: \"{{\(name)}}\" is not a valid name",
            hint: "names are dotted paths such as {{order.id}}, or {{.}} for the current section's value")
    }
}

extension TextTemplate {
    /// The event paths this template may read, each needing its whole value; `[]` means the whole event.
    ///
    /// Inside a section a name may resolve against the section's value or, failing that, from the root, so
    /// the section's own path is read whole and the names inside are also taken as root paths.
    var readPaths: [[String]] {
        var paths: [[String]] = []
        Self.collect(self.segments, insideSection: false, into: &paths)
        return paths
    }

    private static func collect(_ segments: [Segment], insideSection: Bool, into paths: inout [[String]]) {
        for segment in segments {
            switch segment {
            case .text:
                continue
            case .variable(let path):
                if let read = path.readPath(insideSection: insideSection) { paths.append(read) }
            case .section(let path, _, let body):
                if let read = path.readPath(insideSection: insideSection) { paths.append(read) }
                Self.collect(body, insideSection: true, into: &paths)
            }
        }
    }
}

extension TemplatePath {
    /// The event path this name reads from the root, if any: `_kafka` and `_headers` read none, and `.`
    /// reads the whole event outside sections (inside, it is the section's value, read already).
    func readPath(insideSection: Bool) -> [String]? {
        switch self.root {
        case .scope: self.segments
        case .implicit: insideSection ? nil : []
        case .kafka, .headers: nil
        }
    }
}
