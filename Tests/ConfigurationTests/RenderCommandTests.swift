import Foundation
import TestSupport
import Testing

/// `pushbridge render`, run as a child process; its output is compared byte for byte with the goldens in
/// `Golden/`. Set `PUSHBRIDGE_UPDATE_GOLDENS=1` to rewrite them after an intended change, then review the diff.
@Suite struct RenderCommandTests {
    /// One dry run: the route, the event file under `Fixtures/`, extra arguments and the expected exit status.
    struct Case: Sendable, CustomTestStringConvertible {
        var golden: String
        var route: String
        var input: String
        var arguments: [String] = []
        var status: Int32
        var configuration = "render.yaml"

        var testDescription: String { self.golden }
    }

    static let fixtures = "Tests/ConfigurationTests/Fixtures"

    static let cases: [Case] = [
        Case(
            golden: "fan-out", route: "order-shipped", input: "order-shipped.json",
            arguments: ["--key", "customer-42", "--header", "trace-id=abc-123"], status: 0
        ),
        Case(
            golden: "fan-out-compact", route: "order-shipped", input: "order-shipped.json", arguments: ["--compact"],
            status: 0
        ),
        Case(
            golden: "dead-letter-missing-tokens", route: "order-shipped", input: "order-without-tokens.json", status: 1
        ),
        Case(golden: "dead-letter-not-json", route: "order-shipped", input: "not-json.txt", status: 1),
        Case(golden: "not-matched", route: "order-shipped", input: "order-returned.json", status: 1),
        Case(
            golden: "oversized-payload", route: "order-shipped", input: "order-oversized.json",
            arguments: ["--compact"], status: 1
        ),
        Case(golden: "liveactivity", route: "delivery-activity", input: "delivery-progress.json", status: 0),
        // The bridge's own check before sending (NotificationValidation, as the APNs sender runs it): a
        // malformed token among good ones, a collapse id over 64 bytes. Both exit 1, like an oversized payload.
        Case(golden: "rejected-bad-token", route: "order-shipped", input: "order-bad-token.json", status: 1),
        Case(
            golden: "rejected-long-collapse-id", route: "order-shipped", input: "order-long-collapse-id.json", status: 1
        ),
        Case(golden: "passthrough-background-app", route: "raw-passthrough", input: "raw.json", status: 0),
        // A broadcast route: Apple's broadcast request; a channel ID that is not base64 is a dead letter.
        Case(golden: "broadcast", route: "match-score", input: "match-score.json", status: 0),
        Case(
            golden: "dead-letter-bad-channel", route: "match-score", input: "match-score-bad-channel.json", status: 1
        ),
        // What the records carry (render-context.yaml): the context, with an entry the event lacks null and why;
        // the forwarded headers (a missing one absent); the record key outcomes.key takes from the context.
        Case(
            golden: "records-context", route: "campaign-push", input: "campaign-send.json",
            arguments: [
                "--header", "traceparent=00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
                "--header", "x-correlation-id=order-42", "--header", "other=not forwarded",
            ],
            status: 0, configuration: "render-context.yaml"
        ),
        Case(
            golden: "records-context-dead-letter", route: "campaign-push", input: "campaign-send-without-tokens.json",
            arguments: ["--header", "tracestate=congo=t61rcWkgMzE"], status: 1, configuration: "render-context.yaml"
        ),
    ]

    @Test(arguments: Self.cases)
    func outputMatchesTheGolden(_ test: Case) async throws {
        let result = try await PushBridgeExecutable.run(
            [
                "render", "--config", "\(Self.fixtures)/\(test.configuration)", "--route", test.route,
                "--input", "\(Self.fixtures)/\(test.input)",
            ] + test.arguments
        )
        #expect(result.status == test.status, "\(result.standardError)")
        #expect(result.standardError.isEmpty)
        let golden = RepositoryPaths.root.appendingPathComponent("Tests/ConfigurationTests/Golden/\(test.golden).txt")
        if ProcessInfo.processInfo.environment["PUSHBRIDGE_UPDATE_GOLDENS"] == "1" {
            try Data(result.standardOutput.utf8).write(to: golden)
        }
        let expected = String(decoding: try Data(contentsOf: golden), as: UTF8.self)
        #expect(result.standardOutput == expected)
    }

    @Test func standardInputIsTheDefaultInput() async throws {
        let event = try String(
            contentsOfFile: "\(repositoryRoot)/\(Self.fixtures)/delivery-progress.json", encoding: .utf8
        )
        let result = try await PushBridgeExecutable.run(
            ["render", "--config", "\(Self.fixtures)/render.yaml", "--route", "delivery-activity"], input: event
        )
        #expect(result.status == 0)
        let golden = try String(
            contentsOfFile: "\(repositoryRoot)/Tests/ConfigurationTests/Golden/liveactivity.txt", encoding: .utf8
        )
        #expect(result.standardOutput == golden)
    }

    @Test func aHeaderTooLargeToForwardIsShownAsDropped() async throws {
        let result = try await PushBridgeExecutable.run([
            "render", "--config", "\(Self.fixtures)/render-context.yaml", "--route", "campaign-push",
            "--input", "\(Self.fixtures)/campaign-send.json",
            "--header", "traceparent=" + String(repeating: "t", count: 8193), "--header", "tracestate=",
        ])
        #expect(result.status == 0, "\(result.standardError)")
        #expect(result.standardOutput.contains("#   tracestate: \n"))
        #expect(
            result.standardOutput.contains(
                "#   not forwarded, larger than 8192 bytes: traceparent (named in pushbridge-forward-dropped)\n"))
        #expect(!result.standardOutput.contains("tttt"))
    }

    @Test func unknownRouteIsAUsageError() async throws {
        let result = try await PushBridgeExecutable.run(
            ["render", "--config", "\(Self.fixtures)/render.yaml", "--route", "order-shiped", "--input", "-"]
        )
        #expect(result.status == 2)
        #expect(
            result.standardError
                == "pushbridge render: no route named order-shiped in \(Self.fixtures)/render.yaml "
                + "(routes: order-shipped, delivery-activity, raw-passthrough, match-score)\n"
        )
    }

    @Test func malformedHeaderIsAUsageError() async throws {
        let result = try await PushBridgeExecutable.run(
            ["render", "--config", "\(Self.fixtures)/render.yaml", "--route", "order-shipped", "--header", "novalue"]
        )
        #expect(result.status == 2)
        #expect(result.standardError.contains("--header novalue: expected NAME=VALUE"))
    }

    @Test func invalidConfigurationIsReportedWithExitTwo() async throws {
        let files = try TestFiles()
        let yaml = minimalYAML.replacing("topic: com.example.app", with: "topic: com.example.app\n    push_type: alrt")
        try files.write("broken.yaml", yaml)
        let path = files.path("broken.yaml")
        let result = try await PushBridgeExecutable.run(
            ["render", "--config", path, "--route", "greeting", "--input", "-"], environment: files.environment
        )
        #expect(result.status == 2)
        #expect(result.standardError.hasPrefix("\(path):14: routes[0].push_type: unknown push type \"alrt\""))
    }
}
