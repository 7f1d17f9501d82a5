import Foundation
import Routing
import Testing

@testable import Routing

/// The render budget bounds what one rendering writes and how many steps it takes, whatever the event: these
/// tests render compiled templates directly and count both, for events of growing size.
@Suite struct RenderBudgetTests {
    struct Rendering {
        var bytes: [UInt8]
        var stepsUsed: Int
        var result: PayloadTemplate.Rendered
    }

    /// Renders the payload `template` against `json` with a budget of `limit` bytes.
    static func render(_ template: JSONValue, _ json: String, limit: Int = 4096) throws -> Rendering {
        var diagnostics = RouteDiagnostics(routeIndex: 0, routeName: "test")
        let payload = PayloadTemplate(compiling: template, keyPath: "payload", diagnostics: &diagnostics)
        try #require(diagnostics.errors.isEmpty)
        let document = try JSONDocument(parsing: Array(json.utf8), projection: .everything)
        var scope = RenderScope(
            event: SourceEvent(topic: "t", partition: 0, offset: 0, value: Array(json.utf8)), document: document)
        var budget = RenderBudget(byteLimit: limit)
        var bytes: [UInt8] = []
        let result = payload.render(into: &bytes, budget: &budget, scope: &scope)
        return Rendering(bytes: bytes, stepsUsed: RenderBudget.maximumSteps - budget.stepsLeft, result: result)
    }

    /// `{"items": [0, ...] (count), "big": "x..." (bigBytes)}`.
    static func event(items count: Int, bigBytes: Int) -> String {
        let items = Array(repeating: "0", count: count).joined(separator: ",")
        return #"{"items":[\#(items)],"big":"\#(String(repeating: "x", count: bigBytes))"}"#
    }

    @Test(arguments: [(100, 1_000), (1_000, 10_000), (10_000, 100_000), (10_000, 1_000_000)])
    func aRepeatedBigValueWritesAtMostTheLimitPlusOneValue(items: Int, bigBytes: Int) throws {
        let rendering = try Self.render(
            ["t": "{{#items}}{{big}}{{/items}}"], Self.event(items: items, bigBytes: bigBytes))
        guard case .overBudget = rendering.result else {
            Issue.record("rendered whole: \(rendering.bytes.count) bytes")
            return
        }
        // Without the budget: items × bigBytes (up to 10 GB here).
        #expect(rendering.bytes.count <= 4096 + bigBytes + 16)
        #expect(rendering.bytes.capacity <= 2 * (4096 + bigBytes + 16))
        // Each iteration is a step, and its lookup of `big` searches the frame (1) and the root's 2 members.
        #expect(rendering.stepsUsed <= 4 * (4096 / bigBytes + 2))
    }

    @Test(arguments: [1_000, 20_000])
    func nestedSectionsStopAfterTheStepBudget(count: Int) throws {
        let items = Array(repeating: "0", count: count).joined(separator: ",")
        let rendering = try Self.render(
            ["t": "{{#a}}{{#b}}{{^c}}{{/c}}{{/b}}{{/a}}"], #"{"a":[\#(items)],"b":[\#(items)]}"#)
        guard case .overBudget = rendering.result else {
            Issue.record("rendered whole")
            return
        }
        // Without the budget: count² iterations (400 million for 20 000); with it, the budget and one step more
        // (an inner iteration costs 5: itself, and its lookup of `c` in two frames and the root's 2 members).
        #expect(rendering.stepsUsed > RenderBudget.maximumSteps)
        #expect(rendering.stepsUsed <= RenderBudget.maximumSteps + 8)
        #expect(rendering.bytes.count <= 8)
    }

    @Test func lookupsInsideSectionsPayForTheMembersTheySearch() throws {
        // A wide root searched once per iteration: without charging the search, 10 000 iterations would each
        // scan 50 000 members (500 million comparisons) while staying far under an iteration cap.
        let members = (0..<50_000).map { #""m\#($0)":0"# }.joined(separator: ",")
        let items = Array(repeating: "0", count: 10_000).joined(separator: ",")
        let rendering = try Self.render(
            ["t": "{{#items}}{{^nope}}{{/nope}}{{/items}}"], #"{\#(members),"items":[\#(items)]}"#)
        guard case .overBudget = rendering.result else {
            Issue.record("rendered whole")
            return
        }
        #expect(rendering.stepsUsed <= RenderBudget.maximumSteps + 50_004)
    }

    @Test func lookupsOutsideSectionsCostNothing() throws {
        let members = (0..<300_000).map { #""m\#($0)":0"# }.joined(separator: ",")
        let rendering = try Self.render(
            ["a": "{{nope1}}", "b": "x{{nope2}}", "c": "{{m0}}"], #"{\#(members)}"#)
        guard case .written = rendering.result else {
            Issue.record("not written: \(rendering.result)")
            return
        }
        #expect(rendering.stepsUsed == 0)
        #expect(String(decoding: rendering.bytes, as: UTF8.self) == #"{"c":0}"#)
    }

    @Test func aPayloadWithinTheLimitRendersWholeAndUsesOneStepPerIteration() throws {
        let rendering = try Self.render(["t": "{{#items}}[{{.}}]{{/items}}"], Self.event(items: 100, bigBytes: 0))
        guard case .written = rendering.result else {
            Issue.record("not written: \(rendering.result)")
            return
        }
        #expect(rendering.bytes.count == 8 + 300)
        // 100 iterations, and 100 lookups of `.` (one step each).
        #expect(rendering.stepsUsed == 200)
    }

    @Test func aHeaderTemplateStopsAtItsOwnLimit() throws {
        let template = try TextTemplate("{{#items}}{{big}}{{/items}}")
        let json = Self.event(items: 1_000, bigBytes: 100_000)
        var scope = RenderScope(
            event: SourceEvent(topic: "t", partition: 0, offset: 0, value: nil),
            document: try JSONDocument(parsing: Array(json.utf8), projection: .everything))
        guard case .overBudget(let partial) = template.renderText(limit: 256, scope: &scope) else {
            Issue.record("rendered whole")
            return
        }
        #expect(partial.utf8.count == 256)
    }
}

/// Parsing with a projection (what the bridge does): only what the routes read is on the tape, and the tape keeps
/// its memory bound (``JSONDocument/init(parsing:projection:)``: a copy of the input and at most 16 bytes of nodes
/// per input byte).
@Suite struct ProjectedParsingTests {
    @Test func repeatedKeysOfAnObjectTheRoutesReadStayWithinTheBound() throws {
        // Routes reading a.b ... a.g: every repetition of "a" is an object read in part.
        let projection = JSONProjection(paths: ["b", "c", "d", "e", "f", "g"].map { ["a", $0] })
        let repeated = Array(repeating: #""a":{"b":"t","z":1}"#, count: 100_000).joined(separator: ",")
        let bytes = Array("{\(repeated)}".utf8)
        let document = try JSONDocument(parsing: bytes, projection: projection)
        // The root, then per repetition the key `a`, its object, the key `b` and its string; `z` is left out.
        #expect(document.tape.nodes.count == 1 + 4 * 100_000)
        guard case .object(let members) = document.tape.value(JSONTape.root),
            case .object(let first)? = members.first?.value
        else {
            Issue.record("unexpected shape")
            return
        }
        #expect(members.count == 100_000)
        #expect(first.map(\.key) == ["b"])
        #expect(document.allocatedBytes <= 17 * bytes.count)
    }

    @Test func theRootKeepsOnlyTheMembersTheRoutesRead() throws {
        let projection = JSONProjection(paths: [["a"], ["b"], ["c"], ["d"], ["e"], ["f"]])
        let unread = (0..<50).map { #""x\#($0)":{"y":[1,2,3]}"# }.joined(separator: ",")
        let document = try JSONDocument(
            parsing: Array(#"{"a":1,\#(unread),"b":2,"c":3,"d":4,"e":5,"f":{"g":[true]}}"#.utf8),
            projection: projection)
        #expect(document.tape.nodes.count == 1 + 2 * 5 + 5)
        guard case .object(let members) = document.tape.value(JSONTape.root) else {
            Issue.record("not an object")
            return
        }
        #expect(members.map(\.key) == ["a", "b", "c", "d", "e", "f"])
        #expect(members.last?.value == ["g": [true]])
    }

    @Test func aProjectionRejectsWhatTheFullParseRejects() throws {
        let projection = JSONProjection(paths: [["a"]])
        for text in [#"{"a":1,"b":[1,}"#, #"{"a":1,"b":"\x"}"#, #"{"b":1e999,"a":1}"#, #"{"a":1} x"#] {
            #expect(throws: JSONParseError.self) { try JSONDocument(parsing: Array(text.utf8), projection: projection) }
            #expect(throws: JSONParseError.self) { try JSONValue(parsing: text) }
        }
    }
}
