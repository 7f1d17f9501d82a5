import Foundation
import TestSupport
import Testing

/// `pushbridge validate`, run as a child process.
@Suite struct ValidateCommandTests {
    let files: TestFiles

    init() throws {
        self.files = try TestFiles()
    }

    @Test func validConfigurationPrintsASummaryAndExitsZero() async throws {
        let result = try await PushBridgeExecutable.run(
            ["validate", "--config", "config/pushbridge.yaml"], environment: self.files.environment
        )
        #expect(result.status == 0, "\(result.standardError)")
        #expect(result.standardOutput.hasPrefix("config/pushbridge.yaml: valid: 4 routes over 4 input topics\n"))
        #expect(result.standardOutput.contains("  topic orders.shipped: order-shipped\n"))
        #expect(result.standardError.isEmpty)
    }

    @Test func configurationFileDefaultsToTheEnvironmentVariable() async throws {
        var environment = self.files.environment
        environment["PUSHBRIDGE_CONFIG"] = "config/demo.yaml"
        let result = try await PushBridgeExecutable.run(["validate"], environment: environment)
        #expect(result.status == 0, "\(result.standardError)")
        #expect(result.standardOutput.hasPrefix("config/demo.yaml: valid: 2 routes over 2 input topics\n"))
    }

    @Test func invalidConfigurationPrintsEveryProblemAndExitsTwo() async throws {
        let yaml = minimalYAML.replacingOccurrences(of: "    key_id:", with: "    keyid:")
            .replacingOccurrences(of: "apns:\n", with: "apns:\n  request_timeout: 10 sec\n")
        try self.files.write("broken.yaml", yaml)
        let path = self.files.path("broken.yaml")
        let result = try await PushBridgeExecutable.run(
            ["validate", "--config", path], environment: self.files.environment
        )
        #expect(result.status == 2)
        #expect(result.standardOutput.isEmpty)
        #expect(
            result.standardError == """
                \(path):4: apns.request_timeout: "10 sec" is not a duration (a whole number with a unit: \
                250ms, 10s, 5m, 1h, or combined: 1h30m)
                \(path):5: apns.auth.key_id: required key is missing (the 10-character Key ID of the .p8 key)
                \(path):8: apns.auth.keyid: unknown key (did you mean key_id?)
                \(path): 3 problems found

                """
        )
    }

    @Test func missingConfigurationFileExitsTwo() async throws {
        let result = try await PushBridgeExecutable.run(["validate", "--config", "/nonexistent/pb.yaml"])
        #expect(result.status == 2)
        #expect(result.standardError.hasPrefix("/nonexistent/pb.yaml: cannot read the configuration file"))
    }
}
