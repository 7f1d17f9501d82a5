import APNSSimulator
import Crypto
import Foundation
import TestSupport
import TestWaiting
import Testing

@Suite("pushbridge send (the built executable, against the simulator)", .timeLimit(.minutes(1)))
struct SendCommandTests {
    /// Runs the executable with `arguments`; returns its exit status and standard output. Bounded by `timeout`.
    static func run(_ arguments: [String], timeout: Duration = .seconds(30)) async throws -> (Int32, String) {
        let result = try await PushBridgeExecutable.run(arguments, timeout: timeout)
        return (result.status, result.standardOutput)
    }

    private func arguments(_ harness: SimulatorHarness, p8: String, token: String) -> [String] {
        [
            "send", "--token", token, "--topic", Fixtures.topic, "--alert", "hello",
            "--endpoint", "https://127.0.0.1:\(harness.simulator.port)", "--ca-file", harness.tls.caCertificatePath,
            "--key-file", p8, "--key-id", Fixtures.keyID, "--team-id", Fixtures.teamID,
        ]
    }

    @Test("exits 0 on 200 and prints status, apns-id, reason and apns-unique-id")
    func delivered() async throws {
        let harness = try await SimulatorHarness.start()
        let directory = try Fixtures.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let p8 = try Fixtures.writeP8(harness.key, in: directory)
        let (status, output) = try await Self.run(self.arguments(harness, p8: p8, token: Fixtures.deviceToken(1)))
        await harness.stop()
        #expect(status == 0, "\(output)")
        #expect(output.contains("status: 200"))
        #expect(output.contains("apns-id: "))
        #expect(output.contains("reason: -"))
        #expect(output.range(of: #"apns-unique-id: [0-9a-f-]{36}"#, options: .regularExpression) != nil)
    }

    @Test("exits 1 on a rejection and prints the reason")
    func rejected() async throws {
        let token = Fixtures.deviceToken(2)
        let harness = try await SimulatorHarness.start { $0.unregisteredTokens[token] = 1_700_000_000_000 }
        let directory = try Fixtures.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let p8 = try Fixtures.writeP8(harness.key, in: directory)
        let (status, output) = try await Self.run(self.arguments(harness, p8: p8, token: token))
        await harness.stop()
        #expect(status == 1)
        #expect(output.contains("status: 410"))
        #expect(output.contains("reason: Unregistered"))
        #expect(output.contains("timestamp: 1700000000000"))
    }

    @Test("exits 2 on a usage error (no authentication)")
    func usageError() async throws {
        let (status, _) = try await Self.run(["send", "--token", Fixtures.deviceToken(), "--topic", Fixtures.topic])
        #expect(status == 2)
    }

    @Test("exits 2 on an option the parser refuses (missing or unknown)")
    func parserUsageError() async throws {
        #expect(try await Self.run(["send", "--topic", Fixtures.topic]).0 == 2)
        #expect(try await Self.run(["send", "--token", "aa", "--topic", Fixtures.topic, "--bogus"]).0 == 2)
        #expect(try await Self.run(["send", "--help"]).0 == 0)
    }
}
