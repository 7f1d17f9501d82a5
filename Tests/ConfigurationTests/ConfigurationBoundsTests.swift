import Configuration
import Foundation
import TestSupport
import Testing

/// Every configuration duration has a lower and an upper bound; a value outside is a problem naming the key,
/// the bound and the fix, never a value accepted to trap later (`request_timeout: 3000000h` used to be
/// accepted and overflowed at the first request).
@Suite struct ConfigurationBoundsTests {
    let files: TestFiles

    init() throws {
        self.files = try TestFiles()
    }

    /// One duration key, where it goes in ``minimalYAML``, and its bounds.
    struct DurationKey: Sendable, CustomTestStringConvertible {
        var path: String
        /// Replaces `anchor` in the minimal YAML with `anchor` plus the key's line(s), `VALUE` standing for the value.
        var anchor: String
        var insertion: String
        var maximum: String
        var tooLong: String
        var longest: String

        var testDescription: String { self.path }

        func yaml(_ value: String) -> String {
            minimalYAML.replacingOccurrences(
                of: self.anchor, with: self.anchor + self.insertion.replacingOccurrences(of: "VALUE", with: value))
        }
    }

    static let durationKeys: [DurationKey] = [
        DurationKey(
            path: "kafka.commit_interval", anchor: "kafka:\n", insertion: "  commit_interval: VALUE\n",
            maximum: "1h", tooLong: "61m", longest: "1h"),
        DurationKey(
            path: "apns.request_timeout", anchor: "apns:\n", insertion: "  request_timeout: VALUE\n",
            maximum: "10m", tooLong: "3000000h", longest: "10m"),
        DurationKey(
            path: "apns.retry.initial_backoff", anchor: "apns:\n",
            insertion: "  retry:\n    initial_backoff: VALUE\n    max_backoff: 1h\n",
            maximum: "1h", tooLong: "2h", longest: "1h"),
        DurationKey(
            path: "apns.retry.max_backoff", anchor: "apns:\n", insertion: "  retry:\n    max_backoff: VALUE\n",
            maximum: "1h", tooLong: "1h1ms", longest: "1h"),
        DurationKey(
            path: "routes[0].ttl", anchor: "    topic: com.example.app\n", insertion: "    ttl: VALUE\n",
            maximum: "8760h", tooLong: "8761h", longest: "8760h"),
    ]

    @Test(arguments: Self.durationKeys)
    func durationAboveItsBoundIsAProblemNamingKeyAndBound(_ key: DurationKey) throws {
        let problems = self.files.problems(key.yaml(key.tooLong))
        #expect(problems.count == 1, "\(problems)")
        let problem = try #require(problems.first)
        #expect(problem.code == .invalidValue)
        #expect(problem.path == key.path)
        #expect(problem.line != nil)
        #expect(problem.message == "\"\(key.tooLong)\" is too long: must be at most \(key.maximum)")
        #expect(problem.hint == "write a duration of \(key.maximum) or less")
    }

    @Test(arguments: Self.durationKeys)
    func durationAtItsBoundIsAccepted(_ key: DurationKey) throws {
        #expect(self.files.problems(key.yaml(key.longest)).isEmpty)
    }

    @Test(arguments: ["0", "-1", "1000001", "many"])
    func maxWaitingPerKeyOutOfRange(value: String) throws {
        let problems = self.files.problems(
            minimalYAML.replacingOccurrences(of: "kafka:\n", with: "kafka:\n  max_waiting_per_key: \(value)\n"))
        let problem = try #require(problems.first)
        #expect(problem.path == "kafka.max_waiting_per_key")
    }

    @Test func rebalanceDrainTimeoutHasAnUpperBound() throws {
        let problems = self.files.problems(minimalYAML + "shutdown:\n  rebalance_drain_timeout: 100000h\n")
        let problem = try #require(problems.first)
        #expect(problem.path == "shutdown.rebalance_drain_timeout")
    }

    @Test func drainTimeoutHasAnUpperBound() throws {
        let problems = self.files.problems(minimalYAML + "shutdown:\n  drain_timeout: 100000h\n")
        let problem = try #require(problems.first)
        #expect(problems.count == 1)
        #expect(problem.path == "shutdown.drain_timeout")
        #expect(problem.line == 18)
        #expect(problem.description.contains("must be at most 1h"))
    }

    @Test func theIssuesRequestTimeoutReadsAsDocumented() throws {
        let yaml = minimalYAML.replacingOccurrences(of: "apns:\n", with: "apns:\n  request_timeout: 3000000h\n")
        let problem = try #require(self.files.problems(yaml).first)
        #expect(
            problem.description
                == "test.yaml:4: apns.request_timeout: \"3000000h\" is too long: must be at most 10m "
                + "(write a duration of 10m or less)")
    }

    @Test func durationOverflowingMillisecondsIsNotADuration() throws {
        let yaml = minimalYAML.replacingOccurrences(
            of: "apns:\n", with: "apns:\n  request_timeout: 9999999999999999999h\n")
        let problem = try #require(self.files.problems(yaml).first)
        #expect(problem.code == .invalidDuration)
        #expect(problem.path == "apns.request_timeout")
    }

    @Test func countsKeepTheirBounds() throws {
        for (insertion, path) in [
            ("  connections: 65\n", "apns.connections"),
            ("  max_concurrent_streams: 100001\n", "apns.max_concurrent_streams"),
            ("  retry:\n    max_attempts: 1001\n", "apns.retry.max_attempts"),
            ("  connections: 99999999999999999999\n", "apns.connections"),
        ] {
            let yaml = minimalYAML.replacingOccurrences(of: "apns:\n", with: "apns:\n" + insertion)
            let problems = self.files.problems(yaml)
            #expect(problems.map(\.path) == [path], "\(problems)")
        }
        let kafka = minimalYAML.replacingOccurrences(of: "kafka:\n", with: "kafka:\n  max_in_flight: 10000001\n")
        #expect(self.files.problems(kafka).map(\.path) == ["kafka.max_in_flight"])
    }
}
