import Configuration
import Foundation
import Routing
import TestSupport
import Testing

/// `lanes:` and a route's `lane:` (docs/configuration.md, "Lanes").
@Suite struct LaneConfigurationTests {
    let files: TestFiles

    init() throws {
        self.files = try TestFiles()
    }

    /// ``minimalYAML`` with `kafka` lines added (indented like its keys), `lanes` (the section's body, indented by two
    /// spaces) and `route` lines added to its route; `second` adds a route `bulk-greeting` on the same topic.
    func yaml(kafka: String = "", lanes: String?, route: String = "", second: String? = nil) -> String {
        var yaml = minimalYAML.replacingOccurrences(
            of: "  bootstrap_servers: embedded\n", with: "  bootstrap_servers: embedded\n" + kafka
        ).replacingOccurrences(of: "    topic: com.example.app\n", with: "    topic: com.example.app\n" + route)
        if let second {
            yaml += """
                  - name: bulk-greeting
                    input_topic: greetings
                    device_tokens: "{{token}}"
                    topic: com.example.app
                \(second)    payload: { aps: { alert: "{{text}}" } }

                """
        }
        if let lanes { yaml += "lanes:\n" + lanes }
        return yaml
    }

    func event(_ json: String) -> SourceEvent {
        SourceEvent(topic: "greetings", partition: 0, offset: 3, key: nil, value: Array(json.utf8))
    }

    @Test(
        "lanes take their shares of kafka's bounds; the default lane gets the rest; bytes default to the count's share"
    )
    func shares() throws {
        let loaded = try self.files.load(
            self.yaml(
                kafka: "  max_in_flight: 10000\n  max_in_flight_bytes: 64MiB\n",
                lanes: "  urgent: { max_in_flight: 500, max_in_flight_bytes: 8MiB, expedite: true }\n"
                    + "  bulk: { max_in_flight: 2500 }\n",
                route: "    lane: urgent\n", second: "    lane: bulk\n"))
        let lanes = loaded.configuration.lanes
        #expect(lanes.map(\.name) == ["urgent", "bulk"])
        #expect(
            lanes[0]
                == LaneSpec(
                    name: "urgent", maxInFlight: 500, maxInFlightBytes: 8 << 20, expedite: true))
        // A quarter of the count, so a quarter of the bytes.
        #expect(lanes[1] == LaneSpec(name: "bulk", maxInFlight: 2500, maxInFlightBytes: 16 << 20))
        let all = LaneSpec.all(lanes, maxInFlight: 10000, maxInFlightBytes: 64 << 20)
        #expect(all.first == LaneSpec(name: "default", maxInFlight: 7000, maxInFlightBytes: 40 << 20))
        #expect(loaded.router.specs.map(\.lane) == ["urgent", "bulk"])
        // The mapping carries the lane, for the pipeline; an unreadable event takes its topic's first route's lane.
        let mappings = loaded.router.map(event: self.event(#"{"token":"aa","text":"hi"}"#))
        #expect(mappings.map(\.lane) == ["urgent", "bulk"])
        #expect(loaded.router.map(event: self.event("not json")).map(\.lane) == ["urgent"])
    }

    @Test("without lanes every route is in the default lane; lane: default names it explicitly")
    func defaultLane() throws {
        let plain = try self.files.load(minimalYAML)
        #expect(plain.configuration.lanes.isEmpty)
        #expect(plain.router.specs.first?.lane == nil)
        let explicit = try self.files.load(
            self.yaml(lanes: "  urgent: { max_in_flight: 10 }\n", route: "    lane: default\n"))
        #expect(explicit.router.specs.first?.lane == nil)
        #expect(explicit.router.map(event: self.event(#"{"token":"aa","text":"hi"}"#)).first?.lane == nil)
    }

    @Test(
        "a wrong lanes section or lane is an error naming the key and the fix",
        arguments: [
            // An unknown lane on a route, with the closest defined one.
            (
                "  urgent: { max_in_flight: 10 }\n", "    lane: urgnet\n", "routes[0].lane",
                "is not a lane under lanes:", "did you mean urgent?"
            ),
            ("", "    lane: urgent\n", "routes[0].lane", "is not a lane under lanes:", "there is no lanes: section"),
            // Shares above kafka's bounds (10000 and 64 MiB by default).
            (
                "  a: { max_in_flight: 6000 }\n  b: { max_in_flight: 5000 }\n", "    lane: a\n", "lanes",
                "add up to 11000, more than kafka.max_in_flight (10000)", "lower the lanes' max_in_flight"
            ),
            (
                "  a: { max_in_flight: 10, max_in_flight_bytes: 40MiB }\n  b: { max_in_flight: 10, max_in_flight_bytes: 30MiB }\n",
                "    lane: a\n", "lanes", "add up to 70 MiB, more than kafka.max_in_flight_bytes (64 MiB)",
                "raise kafka.max_in_flight_bytes"
            ),
            // Nothing left for a route without a lane.
            (
                "  all: { max_in_flight: 10000 }\n", "", "lanes", "leave the default lane no notification",
                "give every route a lane:"
            ),
            (
                "  all: { max_in_flight: 10, max_in_flight_bytes: 64MiB }\n", "", "lanes",
                "less than 1 MiB of kafka.max_in_flight_bytes", "give every route a lane:"
            ),
            ("  default: { max_in_flight: 10 }\n", "", "lanes.default", "is the lane of routes without lane:", nil),
            ("  \"bad name\": { max_in_flight: 10 }\n", "", "lanes.bad name", "is not a lane name", "letters, digits"),
            ("  urgent: { max_in_flight: 0 }\n", "", "lanes.urgent.max_in_flight", "out of range", nil),
            ("  urgent: {}\n", "", "lanes.urgent.max_in_flight", "required key is missing", "max_in_flight: 500"),
            ("  urgent: { max_in_flight: 10, max_inflight: 3 }\n", "", "lanes.urgent.max_inflight", "unknown key", nil),
            (
                "  urgent: { max_in_flight: 10, expedite: sometimes }\n", "", "lanes.urgent.expedite", "true or false",
                nil
            ),
            ("  urgent: 10\n", "", "lanes.urgent", "expected a mapping", nil),
        ] as [(String, String, String, String, String?)])
    func problems(lanes: String, route: String, path: String, message: String, hint: String?) throws {
        let problems = self.files.problems(self.yaml(lanes: lanes.isEmpty ? nil : lanes, route: route))
        let problem = try #require(problems.first { $0.path == path }, "problems: \(problems)")
        #expect(problem.message.contains(message), "\(problem)")
        if let hint { #expect(problem.hint?.contains(hint) == true, "\(problem)") }
        #expect(problem.line != nil, "\(problem)")
    }

    @Test("the lanes may take all of kafka's bounds when every route has a lane")
    func everyRouteInALane() throws {
        let loaded = try self.files.load(
            self.yaml(lanes: "  all: { max_in_flight: 10000, max_in_flight_bytes: 64MiB }\n", route: "    lane: all\n"))
        #expect(loaded.configuration.lanes.map(\.maxInFlight) == [10000])
    }

    @Test("validate lists each lane with its bounds and routes, and a topic whose routes are in several lanes")
    func validateSummary() async throws {
        try self.files.write(
            "lanes.yaml",
            self.yaml(
                lanes: "  urgent: { max_in_flight: 500, max_in_flight_bytes: 8MiB, expedite: true }\n",
                route: "    lane: urgent\n", second: ""))
        let result = try await PushBridgeExecutable.run(
            ["validate", "--config", self.files.path("lanes.yaml")], environment: self.files.environment)
        #expect(result.status == 0, "\(result.standardError)")
        let summary = result.standardOutput
        #expect(summary.contains("  lane default: max_in_flight 9500, 56 MiB: bulk-greeting\n"), "\(summary)")
        #expect(summary.contains("  lane urgent: max_in_flight 500, 8 MiB, expedited: greeting\n"), "\(summary)")
        #expect(summary.contains("note: topic greetings has routes in lanes default, urgent"), "\(summary)")
    }
}
