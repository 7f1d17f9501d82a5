import APNSSimulator
import Foundation
import TestSupport
import Testing

/// `pushbridge channels` as a user runs it: the built executable, a configuration file, the simulator over TLS +
/// HTTP/2 as the management endpoint.
@Suite("pushbridge channels (the built executable, against the simulator)", .timeLimit(.minutes(2)))
struct ChannelsCommandTests {
    /// A configuration whose `apns` block (and app `live`) points channel management at `harness`.
    static func writeConfiguration(_ harness: SimulatorHarness, in directory: String) throws -> String {
        let p8 = try Fixtures.writeP8(harness.key, in: directory)
        let auth = "{ type: token, key_file: \(p8), key_id: \(Fixtures.keyID), team_id: \(Fixtures.teamID) }"
        let yaml = """
            kafka:
              bootstrap_servers: embedded
            apns:
              environment: sandbox
              ca_file: \(harness.tls.caCertificatePath)
              auth: \(auth)
              broadcast:
                management_endpoint: 127.0.0.1:\(harness.simulator.port)
            apps:
              live:
                ca_file: \(harness.tls.caCertificatePath)
                auth: \(auth)
                broadcast: { management_endpoint: "https://127.0.0.1:\(harness.simulator.port)" }
            routes:
              - name: scores
                input_topic: scores
                device_tokens: "{{token}}"
                topic: \(Fixtures.topic).push-type.liveactivity
                push_type: liveactivity
                payload:
                  aps:
                    event: update
              - name: other
                app: live
                input_topic: other
                device_tokens: "{{token}}"
                topic: com.example.first
                payload: { aps: { alert: hi } }
              - name: other-2
                app: live
                input_topic: other
                device_tokens: "{{token}}"
                topic: com.example.second
                payload: { aps: { alert: hi } }

            """
        let path = (directory as NSString).appendingPathComponent("pushbridge.yaml")
        try Data(yaml.utf8).write(to: URL(fileURLWithPath: path))
        return path
    }

    /// A simulator (its scenario adjusted by `edit`) and a configuration file in a fresh directory pointing at it.
    struct Setup {
        let harness: SimulatorHarness
        let directory: String
        let config: String

        static func start(edit: (inout SimulatorScenario) -> Void = { _ in }) async throws -> Setup {
            let harness = try await SimulatorHarness.start(edit: edit)
            let directory = try Fixtures.temporaryDirectory()
            return Setup(
                harness: harness, directory: directory,
                config: try ChannelsCommandTests.writeConfiguration(harness, in: directory))
        }

        /// `pushbridge channels <arguments> --config <config>`.
        func run(_ arguments: String...) async throws -> PushBridgeExecutable.Result {
            try await PushBridgeExecutable.run(["channels"] + arguments + ["--config", self.config])
        }

        func stop() async {
            await self.harness.stop()
            try? FileManager.default.removeItem(atPath: self.directory)
        }
    }

    @Test("create, list, read and delete round-trip; the bundle ID comes from the app's routes")
    func roundTrip() async throws {
        let setup = try await Setup.start()
        let created = try await setup.run("create", "--storage-policy", "1")
        let channel = created.standardOutput.trimmingCharacters(in: .whitespacesAndNewlines)
        let listed = try await setup.run("list")
        let read = try await setup.run("read", "--channel-id", channel)
        let deleted = try await setup.run("delete", "--channel-id", channel)
        let empty = try await setup.run("list")
        let statistics = setup.harness.simulator.statistics
        await setup.stop()

        #expect(created.status == 0, "\(created.standardError)")
        #expect(Data(base64Encoded: channel) != nil, "create prints the channel ID alone: \(created.standardOutput)")
        #expect(listed.status == 0, "\(listed.standardError)")
        #expect(listed.standardOutput == "\(channel)\n")
        #expect(read.status == 0, "\(read.standardError)")
        #expect(read.standardOutput.contains("message-storage-policy: 1 (Most Recent Message Stored)"))
        #expect(read.standardOutput.contains("push-type: LiveActivity"))
        #expect(deleted.status == 0, "\(deleted.standardError)")
        #expect(deleted.standardOutput.contains("deleted \(channel)"))
        #expect(empty.status == 0)
        #expect(empty.standardOutput.isEmpty)
        #expect(statistics.channelsCreated == 1)
        #expect(statistics.channelsDeleted == 1)
    }

    @Test("an unknown channel exits 1 with Apple's reason and what it means")
    func unknownChannel() async throws {
        let setup = try await Setup.start()
        let result = try await setup.run("read", "--channel-id", Data(repeating: 3, count: 16).base64EncodedString())
        await setup.stop()
        #expect(result.status == 1)
        #expect(result.standardError.contains("ChannelNotRegistered"))
        #expect(result.standardError.contains("does not exist"))
        #expect(!result.standardError.contains("BEGIN PRIVATE KEY"))
    }

    @Test("--app picks an app; its routes name two bundle IDs, so --topic is required and used")
    func appAndTopic() async throws {
        let setup = try await Setup.start { $0.topics = [Fixtures.topic, "com.example.first"] }
        let ambiguous = try await setup.run("list", "--app", "live")
        let created = try await setup.run("create", "--app", "live", "--topic", "com.example.first")
        let other = try await setup.run("list")
        let refused = try await setup.run("list", "--app", "live", "--topic", "com.example.unknown")
        await setup.stop()
        #expect(ambiguous.status == 2)
        #expect(ambiguous.standardError.contains("--topic"))
        #expect(ambiguous.standardError.contains("com.example.first, com.example.second"))
        #expect(created.status == 0, "\(created.standardError)")
        #expect(other.standardOutput.isEmpty, "channels belong to their bundle ID")
        #expect(refused.status == 1)
        #expect(refused.standardError.contains("TopicDisallowed"))
    }

    @Test("usage and configuration mistakes exit 2 and name the fix")
    func usageErrors() async throws {
        let setup = try await Setup.start()
        let noApp = try await setup.run("list", "--app", "nope")
        let policy = try await setup.run("create", "--storage-policy", "2")
        let noChannel = try await setup.run("read")
        let missingConfig = try await PushBridgeExecutable.run(
            ["channels", "list", "--config", (setup.directory as NSString).appendingPathComponent("absent.yaml")])
        let help = try await PushBridgeExecutable.run(["channels", "--help"])
        await setup.stop()
        #expect(noApp.status == 2)
        #expect(noApp.standardError.contains("defined: live"))
        #expect(policy.status == 2)
        #expect(policy.standardError.contains("--storage-policy must be 0 or 1"))
        #expect(noChannel.status == 2)
        #expect(missingConfig.status == 2)
        #expect(help.status == 0)
        #expect(help.standardOutput.contains("create"))
    }

    @Test("an unreachable management endpoint exits 1 within the timeout, with one error line")
    func unreachable() async throws {
        let setup = try await Setup.start()
        // The management endpoint moved to a port that refuses connections (not the stopped simulator's, which
        // another test's server may be given meanwhile).
        let refusing = try RefusingPort()
        let yaml = try String(contentsOfFile: setup.config, encoding: .utf8).replacingOccurrences(
            of: "127.0.0.1:\(setup.harness.simulator.port)", with: "127.0.0.1:\(refusing.port)")
        try Data(yaml.utf8).write(to: URL(fileURLWithPath: setup.config))
        let result = try await setup.run("list", "--timeout", "2")
        await setup.stop()
        withExtendedLifetime(refusing) {}
        #expect(result.status == 1)
        #expect(result.standardError.hasPrefix("error: no connection"), "one error line, no log noise")
    }
}
