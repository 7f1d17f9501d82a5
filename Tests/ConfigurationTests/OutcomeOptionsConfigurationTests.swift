import Configuration
import Foundation
import Routing
import Testing

/// A route's `context`, `outcomes.key` and `outcomes.forward_headers` (docs/configuration.md, "Context on records"):
/// read as written, and every mistake reported at its key with the fix.
@Suite struct OutcomeOptionsConfigurationTests {
    let files: TestFiles

    init() throws {
        self.files = try TestFiles()
    }

    /// ``minimalYAML`` with `route` lines added to its route (indented like its keys) and `outcomes` lines (indented
    /// by two) as an `outcomes:` section.
    func yaml(route: String = "", outcomes: String? = nil) -> String {
        minimalYAML.replacingOccurrences(
            of: "    topic: com.example.app\n", with: "    topic: com.example.app\n" + route)
            + (outcomes.map { "outcomes:\n" + $0 } ?? "")
    }

    /// The only problem of `yaml`; records an issue when there are more or none.
    func onlyProblem(_ yaml: String) throws -> ConfigurationProblem {
        let problems = self.files.problems(yaml)
        #expect(problems.count == 1, "\(problems)")
        return try #require(problems.first)
    }

    static let context = """
            context:
              campaign: "{{campaign.id}}"
              user: "{{user.id}}"

        """

    @Test func theDefaultsAreTheRecordsOfBefore() throws {
        let loaded = try self.files.load(self.yaml())
        #expect(loaded.configuration.outcomes.key == .deviceToken)
        #expect(loaded.configuration.outcomes.forwardHeaders.isEmpty)
        #expect(loaded.configuration.routes.first?.context.isEmpty == true)
    }

    @Test func contextKeyAndForwardedHeadersAreReadAsWritten() throws {
        let loaded = try self.files.load(
            self.yaml(
                route: Self.context,
                outcomes: "  key: context.campaign\n  forward_headers: [traceparent, tracestate, x-correlation-id]\n"))
        #expect(loaded.configuration.outcomes.key == .context("campaign"))
        #expect(
            loaded.configuration.outcomes.forwardHeaders.names == ["traceparent", "tracestate", "x-correlation-id"])
        #expect(loaded.configuration.routes.first?.context.map(\.name) == ["campaign", "user"])
        let event = SourceEvent(
            topic: "greetings", partition: 0, offset: 3, value: Array(#"{"token":"aa","campaign":{"id":7}}"#.utf8))
        let context = try #require(loaded.router.map(event: event).first?.context)
        #expect(String(decoding: context.json, as: UTF8.self) == #"{"campaign":7,"user":null}"#)
    }

    @Test(arguments: [("source_key", OutcomeKey.sourceKey), ("notification_id", .notificationID)])
    func everyOtherKeyIsRead(text: String, key: OutcomeKey) throws {
        #expect(try self.files.load(self.yaml(outcomes: "  key: \(text)\n")).configuration.outcomes.key == key)
    }

    @Test func anUnknownKeySuggestsTheClosestAndListsTheChoices() throws {
        let problem = try self.onlyProblem(self.yaml(outcomes: "  key: device_tokens\n"))
        #expect(problem.code == .invalidValue)
        #expect(problem.path == "outcomes.key")
        #expect(problem.line == 18)
        #expect(problem.message == #""device_tokens" is not a record key"#)
        #expect(
            problem.hint
                == "did you mean device_token? allowed: device_token, source_key, notification_id, context.<name>")
    }

    @Test func aBareContextNameIsShownHowToWriteIt() throws {
        let problem = try self.onlyProblem(self.yaml(route: Self.context, outcomes: "  key: campaign\n"))
        #expect(problem.path == "outcomes.key")
        #expect(problem.hint?.hasSuffix("; to key by a context entry, write context.campaign") == true, "\(problem)")
    }

    @Test func contextWithoutANameIsAnError() throws {
        let problem = try self.onlyProblem(self.yaml(route: Self.context, outcomes: "  key: context.\n"))
        #expect(problem.message == #""context." names no context entry"#)
    }

    @Test func aContextKeyNeedsTheEntryInEveryRoute() throws {
        let second = """
              - name: promo
                input_topic: promos
                device_tokens: "{{token}}"
                topic: com.example.app
                context: { campaing: "{{campaign}}" }
                payload: { aps: { alert: "Sale" } }

            """
        let yaml = self.yaml(route: Self.context, outcomes: "  key: context.campaign\n")
            .replacingOccurrences(of: "\noutcomes:", with: "\n" + second + "outcomes:")
        let problem = try self.onlyProblem(yaml)
        #expect(problem.code == .invalidValue)
        #expect(problem.path == "outcomes.key")
        #expect(problem.line == 27)
        #expect(problem.message == "context.campaign names no context entry of routes[1] (promo)")
        #expect(problem.hint?.contains("add `campaign` to the context of every route") == true)
    }

    @Test func aContextKeyThatNoRouteDefinesSuggestsTheClosestName() throws {
        let problem = try self.onlyProblem(self.yaml(route: Self.context, outcomes: "  key: context.campain\n"))
        #expect(problem.message == "context.campain names no context entry of routes[0] (greeting)")
        #expect(problem.hint?.hasPrefix("did you mean context.campaign? ") == true, "\(problem)")
    }

    @Test(arguments: [
        ("  forward_headers: traceparent\n", "outcomes.forward_headers", "expected a list, found a string"),
        ("  forward_headers: [traceparent, \"\"]\n", "outcomes.forward_headers[1]", "a header name must not be empty"),
        (
            "  forward_headers: [traceparent, traceparent]\n", "outcomes.forward_headers[1]",
            #""traceparent" is listed twice"#
        ),
        (
            "  forward_headers: [\"trace parent\"]\n", "outcomes.forward_headers[0]",
            #""trace parent" is not a header name of visible ASCII characters"#
        ),
        (
            "  forward_headers: [pushbridge-error]\n", "outcomes.forward_headers[0]",
            "pushbridge-error is a header the bridge writes itself, not one it can forward"
        ),
        ("  forward_headers: [[a]]\n", "outcomes.forward_headers[0]", "expected a string, found a list"),
        (
            "  forward_headers: [\(String(repeating: "h", count: 129))]\n", "outcomes.forward_headers[0]",
            "the header name is 129 bytes; at most 128"
        ),
    ])
    func badForwardedHeadersAreReportedAtTheirEntry(outcomes: String, path: String, message: String) throws {
        let problem = try self.onlyProblem(self.yaml(outcomes: outcomes))
        #expect(problem.path == path)
        #expect(problem.message == message)
        #expect(problem.line == 18)
    }

    @Test func moreForwardedHeadersThanTheBoundIsAnError() throws {
        let names = (0...HeaderForwarding.maximumNames).map { "h\($0)" }.joined(separator: ", ")
        let problem = try self.onlyProblem(self.yaml(outcomes: "  forward_headers: [\(names)]\n"))
        #expect(problem.path == "outcomes.forward_headers")
        #expect(problem.message == "17 headers; at most 16 may be forwarded")
    }

    @Test func routeContextProblemsAreReportedAtTheirLine() throws {
        let yaml = self.yaml(route: "    context:\n      ok: \"{{a}}\"\n      bad.name: \"{{b}}\"\n      list: [1]\n")
        let problems = self.files.problems(yaml)
        #expect(problems.map(\.path) == ["routes[0].context.bad.name", "routes[0].context.list"], "\(problems)")
        #expect(problems.map(\.line) == [16, 17])
        #expect(problems.first?.code == .route)
    }
}
