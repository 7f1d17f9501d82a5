import Foundation
import TestSupport
import Testing

/// Numbers on the command line outside their range are usage errors (exit 2) with a message naming the option
/// and the range, never a trap: `send --timeout 20000000000` used to overflow converting to nanoseconds.
@Suite("command-line numbers out of range", .timeLimit(.minutes(1)))
struct CommandLineBoundsTests {
    static let send = ["send", "--token", Fixtures.deviceToken(), "--topic", Fixtures.topic]

    struct Case: Sendable, CustomTestStringConvertible {
        var arguments: [String]
        var message: String
        var testDescription: String { self.arguments.joined(separator: " ") }
    }

    static let cases: [Case] = [
        Case(arguments: send + ["--timeout", "20000000000"], message: "--timeout must be between 1 and 3600 seconds"),
        Case(arguments: send + ["--timeout", "0"], message: "--timeout must be between 1 and 3600 seconds"),
        Case(arguments: send + ["--expiration", "1795000000000"], message: "--expiration must be UNIX epoch seconds"),
        Case(arguments: send + ["--expiration=-1"], message: "--expiration must be UNIX epoch seconds"),
        Case(arguments: send + ["--priority", "7"], message: "--priority must be 10, 5 or 1"),
        Case(arguments: send + ["--priority", "99999999999999999999"], message: "--priority"),
        Case(arguments: ["simulator", "--port", "70000"], message: "--port must be between 0 and 65535"),
        Case(arguments: ["simulator", "--port=-1"], message: "--port must be between 0 and 65535"),
        Case(
            arguments: ["doctor", "--apns-timeout", "20000000000"],
            message: "--apns-timeout must be between 1 and 600 seconds"),
        Case(arguments: ["doctor", "--kafka-timeout", "0"], message: "--kafka-timeout must be between 1 and 600"),
    ]

    @Test(arguments: Self.cases)
    func outOfRangeIsAUsageError(_ test: Case) async throws {
        let result = try await PushBridgeExecutable.run(test.arguments)
        #expect(result.status == 2, "\(result.standardError)")
        #expect(result.standardError.contains(test.message), "\(result.standardError)")
        #expect(!result.standardError.contains("Fatal error"))
    }
}
