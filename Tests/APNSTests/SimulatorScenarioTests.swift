import APNSSimulator
import BinaryProvider
import Foundation
import Testing

@Suite("Simulator scenario files")
struct SimulatorScenarioTests {
    @Test("the example scenario in config/ loads with every setting")
    func exampleLoads() throws {
        let file = URL(fileURLWithPath: #filePath)
            .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("config/simulator-scenario.yaml").path
        let scenario = try SimulatorScenario.load(file: file)
        #expect(scenario.topics == ["com.example.app", "com.example.other"])
        #expect(scenario.jwtKeys.map(\.keyID) == ["ABC123DEFG"])
        #expect(scenario.jwtKeys.first?.teamID == "TEAM123456")
        #expect(scenario.unregisteredTokens.count == 2)
        #expect(scenario.unregisteredTokens[String(repeating: "0", count: 62) + "aa"] == 1_700_000_000_000)
        #expect(scenario.badTokens.count == 1)
        #expect(scenario.seed == 42)
        #expect(scenario.tooManyRequestsRate == 0.01)
        #expect(scenario.maxConcurrentStreams == 1000)
        #expect(scenario.goawayAfterStreams == 5000)
        #expect(scenario.dropAfterStreams == 20000)
        #expect(scenario.streamLimitSchedule.map(\.maxConcurrentStreams) == [1, 1000])
        #expect(scenario.minimumTokenUpdateInterval == .seconds(1200))
        #expect(scenario.channelLimitPerApp == 10_000)
        #expect(
            scenario.channels == [
                .init(bundleID: "com.example.app", channelID: "dHN0LXNyY2gtY2hubA==", storagePolicy: 1)
            ])
    }

    @Test("an unknown key is an error naming the key path, the line and the keys allowed")
    func unknownKey() {
        let yaml = """
            topics: [com.example.app]
            connections:
              goaway_after: 10
            """
        let error = #expect(throws: ScenarioError.self) {
            try SimulatorScenario.parse(yaml: yaml, file: "s.yaml")
        }
        #expect(error?.keyPath == "connections.goaway_after")
        #expect(error?.line == 3)
        #expect(error?.description.contains("goaway_after_streams") == true)
    }

    @Test("binary_gateway sets the binary gateway's faults; a wrong key or value names its path")
    func binaryGateway() throws {
        let scenario = try SimulatorScenario.parse(
            yaml: "binary_gateway: {processing_error_at: 3, shutdown_after: 5, drop_after: 7, payload_limit: 256}\n",
            file: "s.yaml")
        #expect(scenario.binaryGateway.processingErrorAt == 3)
        #expect(scenario.binaryGateway.shutdownAfter == 5)
        #expect(scenario.binaryGateway.dropAfter == 7)
        #expect(scenario.binaryGateway.payloadLimitBytes == 256)
        do {
            _ = try SimulatorScenario.parse(yaml: "binary_gateway: {shutdown: 5}\n", file: "s.yaml")
            Issue.record("an unknown key was accepted")
        } catch {
            #expect(error.keyPath == "binary_gateway.shutdown")
        }
        do {
            _ = try SimulatorScenario.parse(yaml: "binary_gateway: {processing_error_at: 0}\n", file: "s.yaml")
            Issue.record("processing_error_at 0 was accepted")
        } catch {
            #expect(error.keyPath == "binary_gateway.processing_error_at")
        }
    }

    @Test("binary_gateway.feedback_tokens lists entries for the feedback service alone; a wrong entry names its path")
    func feedbackTokens() throws {
        let token = String(repeating: "ab", count: 32)
        let before = UInt32(Date().timeIntervalSince1970)
        let scenario = try SimulatorScenario.parse(
            yaml: "binary_gateway:\n  feedback_tokens:\n    - \(token)\n    - {token: \"0A0B\", time: 1700000000}\n",
            file: "s.yaml")
        let entries = scenario.binaryGateway.feedbackTokens
        #expect(entries.map(\.deviceToken) == [token, "0a0b"])
        #expect(entries[0].timeEpochSeconds >= before, "no time: the time the scenario was read")
        #expect(entries[1].timeEpochSeconds == 1_700_000_000)
        #expect(entries[1].token == [0x0A, 0x0B])
        for (yaml, path) in [
            ("binary_gateway: {feedback_tokens: [xyz]}", "binary_gateway.feedback_tokens[0]"),
            ("binary_gateway: {feedback_tokens: [{token: ab, time: -1}]}", "binary_gateway.feedback_tokens[0].time"),
            ("binary_gateway: {feedback_tokens: [{token: ab, since: 1}]}", "binary_gateway.feedback_tokens[0].since"),
            (
                "binary_gateway: {feedback_tokens: [\(String(repeating: "a", count: 202))]}",
                "binary_gateway.feedback_tokens[0]"
            ),
            ("binary_gateway: {feedback_tokens: {token: ab}}", "binary_gateway.feedback_tokens"),
        ] {
            let error = #expect(throws: ScenarioError.self, "\(yaml)") {
                try SimulatorScenario.parse(yaml: yaml, file: "s.yaml")
            }
            #expect(error?.keyPath == path, "\(yaml)")
        }
    }

    @Test("a rate outside 0...1 and rates summing over 1 are errors")
    func rates() {
        #expect(throws: ScenarioError.self) {
            try SimulatorScenario.parse(yaml: "faults: {rate_429: 2}", file: "s.yaml")
        }
        let error = #expect(throws: ScenarioError.self) {
            try SimulatorScenario.parse(yaml: "faults: {rate_429: 0.6, rate_503: 0.6}", file: "s.yaml")
        }
        #expect(error?.keyPath == "faults")
    }

    @Test("a JWT key without a usable key is an error naming the entry")
    func jwtKeyErrors() {
        let error = #expect(throws: ScenarioError.self) {
            try SimulatorScenario.parse(yaml: "jwt_keys:\n  - kid: K\n    public_key: nope\n", file: "s.yaml")
        }
        #expect(error?.keyPath == "jwt_keys[0].public_key")
    }

    @Test("a device token that is not hex is an error")
    func tokenErrors() {
        let error = #expect(throws: ScenarioError.self) {
            try SimulatorScenario.parse(yaml: "tokens:\n  bad: [xyz]\n", file: "s.yaml")
        }
        #expect(error?.keyPath == "tokens.bad[0]")
    }
}
