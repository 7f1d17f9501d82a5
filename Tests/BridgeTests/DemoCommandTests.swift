import Foundation
import TestSupport
import Testing

// Serialized: the demo listens on fixed ports (the simulator on 2197, the admin server on 9464).
@Suite("pushbridge demo", .serialized)
struct DemoCommandTests {
    @Test("the demo accounts for every sample event and prints the summary table; exit 0")
    func demoAccountsForEveryEvent() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("pushbridge-demo-\(UUID())")
        defer { try? FileManager.default.removeItem(at: directory) }
        let result = try await PushBridgeExecutable.run(
            ["demo", "--events", "200"], environment: ["PUSHBRIDGE_DEMO_DIR": directory.path],
            timeout: .seconds(90)
        )
        #expect(result.status == 0, "stderr: \(result.standardError)")
        let rows = Self.summaryRows(result.standardOutput)
        // 200 events: every 20th is not JSON and every 20th has no tokens (20 dead letters); every 20th has a
        // malformed token and every 20th an unregistered one (10 rejected each, 20 invalid tokens).
        #expect(rows["dead-lettered"] == 20)
        #expect(rows["rejected"] == 20)
        #expect(rows["invalid tokens"] == 20)
        #expect(rows["failed"] == 0)
        // Every 20th matches no route: the row is the bridge's pushbridge_events_unmatched_total, compared with the
        // plan by the demo itself (DemoTallyTests: a miscount fails it).
        #expect(rows["unmatched (skipped)"] == 10)
        #expect((rows["delivered"] ?? 0) > 200)
        #expect(result.standardOutput.contains("20 dead letters expected, 20 written"))
        #expect(result.standardOutput.contains("20 invalid tokens expected, 20 written"))
        #expect(
            result.standardOutput.contains(
                "10 unmatched events expected, 10 counted by the bridge (pushbridge_events_unmatched_total)"))
    }

    /// The container image runs PushBridge as user 10001. A socket option that needs privileges (once,
    /// `SO_DEBUG` set where `TCP_NODELAY` was meant) works as root and fails every connection otherwise, so
    /// when the suite runs as root the demo runs again as an unprivileged user. (Run as another user, the test
    /// above already is this one.)
    @Test(
        "the demo delivers when run by an unprivileged user, as in the container image",
        .enabled(if: getuid() == 0, "the suite runs as an unprivileged user: the test above covers it")
    )
    func demoRunsUnprivileged() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("pushbridge-demo-\(UUID())")
        try FileManager.default.createDirectory(
            at: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o777])
        defer { try? FileManager.default.removeItem(at: directory) }
        // The configuration goes next to the demo's files, where the user can read it.
        let configuration = directory.appendingPathComponent("demo.yaml")
        try FileManager.default.copyItem(
            at: RepositoryPaths.root.appendingPathComponent("config/demo.yaml"), to: configuration)
        let result = try await PushBridgeExecutable.run(
            ["demo", "--events", "40", "--config", configuration.path],
            environment: ["PUSHBRIDGE_DEMO_DIR": directory.path], timeout: .seconds(90), asUser: 10001
        )
        #expect(result.status == 0, "stderr: \(result.standardError)")
        #expect((Self.summaryRows(result.standardOutput)["delivered"] ?? 0) > 40)
    }

    @Test("the demo refuses a nonsensical event count with exit 2")
    func demoRejectsBadEventCount() async throws {
        let result = try await PushBridgeExecutable.run(["demo", "--events", "0"])
        #expect(result.status == 2)
        #expect(result.standardError.contains("--events"))
    }

    /// The summary table's rows: name -> count.
    static func summaryRows(_ output: String) -> [String: Int] {
        var rows: [String: Int] = [:]
        for line in output.split(separator: "\n") {
            let cells = line.split(separator: "  ", omittingEmptySubsequences: true)
                .map { $0.trimmingCharacters(in: .whitespaces) }
            if cells.count == 3, let count = Int(cells[1]) { rows[cells[0]] = count }
        }
        return rows
    }
}
