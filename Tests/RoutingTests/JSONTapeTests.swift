import APNSCore
import Testing

@testable import Routing

/// The tape the mapper reads events in (``JSONDocument``): it says what the tree of ``JSONValue`` says, writes the
/// same JSON, and its lookups answer what the tree's do.
@Suite struct JSONTapeTests {
    static let documents: [String] = [
        #"{}"#, #"[]"#, #"0"#, #"-0"#, #""""#, #"null"#, #"true"#, #"false"#,
        #"{"a":1,"b":[1,2.5,-3e2,{"c":null}],"d":{"e":"f","g":[[],{}]}}"#,
        #"["x\"y\\z\n\u0041\u00e9\ud83d\udce6", "a\/b", "\u0000\u001f"]"#,
        #"{"dup":1,"dup":2,"dup":{"x":3}}"#,
        #"{"a longer member name than sixteen bytes":{"another name well past sixteen":7}}"#,
        #"[9223372036854775807,-9223372036854775808,9223372036854775808,1.5e300,1e-400]"#,
        #"{"Grüße":"東京","📦":["🚚"]}"#,
        #"  {"spaced" : [ 1 , 2 ] }  "#,
    ]

    static func document(_ text: String) throws -> JSONDocument {
        try JSONDocument(parsing: Array(text.utf8), projection: .everything)
    }

    @Test(arguments: Self.documents)
    func theTapeBuildsTheTreeAndWritesTheSameJSON(text: String) throws {
        let tree = try JSONValue(parsing: text)
        let document = try Self.document(text)
        #expect(document.tape.value(JSONTape.root) == tree)
        var written: [UInt8] = []
        document.tape.serialize(JSONTape.root, into: &written)
        #expect(written == tree.serialized())
        #expect(document.tape.value(JSONTape.root, equals: tree))
    }

    @Test func equalityIsTypeExactWithoutBuildingScalars() throws {
        let document = try Self.document(#"[1,1.0,"1",true,null,"é"]"#)
        let tape = document.tape
        let elements = (0..<6).compactMap { tape.element(of: JSONTape.root, at: $0) }
        #expect(elements.count == 6)
        #expect(tape.value(elements[0], equals: .integer(1)))
        #expect(!tape.value(elements[0], equals: .double(1)))
        #expect(tape.value(elements[1], equals: .double(1)))
        #expect(!tape.value(elements[2], equals: .integer(1)))
        #expect(tape.value(elements[2], equals: "1"))
        #expect(tape.value(elements[3], equals: true) && !tape.value(elements[3], equals: false))
        #expect(tape.value(elements[4], equals: .null))
        #expect(tape.value(elements[5], equals: "é") && !tape.value(elements[5], equals: "e"))
        #expect(tape.element(of: JSONTape.root, at: 6) == nil)
        #expect(tape.element(of: JSONTape.root, at: -1) == nil)
    }

    /// Follows `path` as a template names it, from the root (outside any section).
    static func lookUp(_ path: String, in document: JSONDocument) throws -> JSONValue? {
        let scope = RenderScope(event: SourceEvent(topic: "t", partition: 0, offset: 0, value: nil), document: document)
        return scope.resolve(try #require(TemplatePath(path)))
    }

    @Test func lookupsAnswerWhatTheTreeAnswers() throws {
        let text = #"""
            {"dup":1,"a":{"b":[10,{"c":"deep"}]},"dup":2,
             "a longer member name than sixteen bytes":{"another name well past sixteen":7},
             "a longer member name than sixteen bytez":0,"esc\"aped":"yes","":"empty"}
            """#
        let document = try Self.document(text)
        let tree = try JSONValue(parsing: text)
        for path in [
            "dup", "a.b.0", "a.b.1.c", "a.b.2", "a.b.x", "a.c", "nothing", "dup.x",
            "a longer member name than sixteen bytes.another name well past sixteen",
            "a longer member name than sixteen bytez", #"esc"aped"#,
        ] {
            let expected = try #require(TemplatePath(path)).segments.reduce(Optional(tree)) {
                $0?.child(named: $1)
            }
            #expect(try Self.lookUp(path, in: document) == expected, "\(path)")
        }
        #expect(try Self.lookUp("dup", in: document) == 2, "the last of repeated names")
    }

    @Test func segmentKeysCompareWholeNames() throws {
        let short = SegmentKey("order")
        let long = SegmentKey("a member name of more than sixteen bytes")
        Array("order".utf8).withUnsafeBufferPointer { #expect(short.matches($0, segment: "order")) }
        Array("ordex".utf8).withUnsafeBufferPointer { #expect(!short.matches($0, segment: "order")) }
        Array("orde".utf8).withUnsafeBufferPointer { #expect(!short.matches($0, segment: "order")) }
        let name = "a member name of more than sixteen bytes"
        Array(name.utf8).withUnsafeBufferPointer { #expect(long.matches($0, segment: name)) }
        let other = "a member name of more than sixteen bytez"
        Array(other.utf8).withUnsafeBufferPointer { #expect(!long.matches($0, segment: name)) }
        #expect(SegmentKey("12").index == 12 && SegmentKey("x").index == nil)
    }

    /// A lookup inside a section is charged for the array elements it walks past, so an index far into a long
    /// array costs its steps every time it repeats.
    @Test func anArrayIndexInsideASectionIsChargedTheElementsWalked() throws {
        let rendering = try RenderBudgetTests.render(
            ["t": "{{#items}}{{list.500}}{{/items}}"],
            #"{"items":[1,2,3],"list":[\#((0...600).map(String.init).joined(separator: ","))]}"#)
        guard case .written = rendering.result else {
            Issue.record("not written: \(rendering.result)")
            return
        }
        #expect(rendering.bytes == Array(#"{"t":"500500500"}"#.utf8))
        // 3 iterations; each lookup searches the element's own value (1), the root (2 members), then walks 501.
        #expect(rendering.stepsUsed == 3 + 3 * (1 + 2 + 501))
    }
}
