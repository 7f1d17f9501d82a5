import Foundation
import Testing
import TestSupport

@Suite("pushbridge demo")
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
        #expect(rows["unmatched (skipped)"] == 10)
        #expect((rows["delivered"] ?? 0) > 200)
        #expect(result.standardOutput.contains("20 dead letters expected, 20 written"))
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
