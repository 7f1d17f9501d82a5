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

    @Test("create, list, read and delete round-trip; the bundle ID comes from the app's routes")
    func roundTrip() async throws {
        let harness = try await SimulatorHarness.start()
        let directory = try Fixtures.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let config = try Self.writeConfiguration(harness, in: directory)

        let created = try await PushBridgeExecutable.run(
            ["channels", "create", "--config", config, "--storage-policy", "1"])
        #expect(created.status == 0, "\(created.standardError)")
        let channel = created.standardOutput.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(Data(base64Encoded: channel) != nil, "create prints the channel ID alone: \(created.standardOutput)")

        let listed = try await PushBridgeExecutable.run(["channels", "list", "--config", config])
        #expect(listed.status == 0, "\(listed.standardError)")
        #expect(listed.standardOutput == "\(channel)\n")

        let read = try await PushBridgeExecutable.run(["channels", "read", "--config", config, "--channel-id", channel])
        #expect(read.status == 0, "\(read.standardError)")
        #expect(read.standardOutput.contains("message-storage-policy: 1 (Most Recent Message Stored)"))
        #expect(read.standardOutput.contains("push-type: LiveActivity"))

        let deleted = try await PushBridgeExecutable.run(
            ["channels", "delete", "--config", config, "--channel-id", channel])
        #expect(deleted.status == 0, "\(deleted.standardError)")
        #expect(deleted.standardOutput.contains("deleted \(channel)"))

        let empty = try await PushBridgeExecutable.run(["channels", "list", "--config", config])
        #expect(empty.status == 0)
        #expect(empty.standardOutput.isEmpty)
        let statistics = harness.simulator.statistics
        await harness.stop()
        #expect(statistics.channelsCreated == 1)
        #expect(statistics.channelsDeleted == 1)
    }

    @Test("an unknown channel exits 1 with Apple's reason and what it means")
    func unknownChannel() async throws {
        let harness = try await SimulatorHarness.start()
        let directory = try Fixtures.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let config = try Self.writeConfiguration(harness, in: directory)
        let unknown = Data(repeating: 3, count: 16).base64EncodedString()
        let result = try await PushBridgeExecutable.run(
            ["channels", "read", "--config", config, "--channel-id", unknown])
        await harness.stop()
        #expect(result.status == 1)
        #expect(result.standardError.contains("ChannelNotRegistered"))
        #expect(result.standardError.contains("does not exist"))
        #expect(!result.standardError.contains("BEGIN PRIVATE KEY"))
    }

    @Test("--app picks an app; its routes name two bundle IDs, so --topic is required and used")
    func appAndTopic() async throws {
        let harness = try await SimulatorHarness.start { $0.topics = [Fixtures.topic, "com.example.first"] }
        let directory = try Fixtures.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let config = try Self.writeConfiguration(harness, in: directory)
        let ambiguous = try await PushBridgeExecutable.run(["channels", "list", "--config", config, "--app", "live"])
        let created = try await PushBridgeExecutable.run(
            ["channels", "create", "--config", config, "--app", "live", "--topic", "com.example.first"])
        let other = try await PushBridgeExecutable.run(["channels", "list", "--config", config])
        let refused = try await PushBridgeExecutable.run(
            ["channels", "list", "--config", config, "--app", "live", "--topic", "com.example.unknown"])
        await harness.stop()
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
        let harness = try await SimulatorHarness.start()
        let directory = try Fixtures.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let config = try Self.writeConfiguration(harness, in: directory)
        let noApp = try await PushBridgeExecutable.run(["channels", "list", "--config", config, "--app", "nope"])
        let policy = try await PushBridgeExecutable.run(
            ["channels", "create", "--config", config, "--storage-policy", "2"])
        let noChannel = try await PushBridgeExecutable.run(["channels", "read", "--config", config])
        let missingConfig = try await PushBridgeExecutable.run(
            ["channels", "list", "--config", (directory as NSString).appendingPathComponent("absent.yaml")])
        let help = try await PushBridgeExecutable.run(["channels", "--help"])
        await harness.stop()
        #expect(noApp.status == 2)
        #expect(noApp.standardError.contains("defined: live"))
        #expect(policy.status == 2)
        #expect(policy.standardError.contains("--storage-policy must be 0 or 1"))
        #expect(noChannel.status == 2)
        #expect(missingConfig.status == 2)
        #expect(help.status == 0)
        #expect(help.standardOutput.contains("create"))
    }

    @Test("an unreachable management endpoint exits 1 within the timeout")
    func unreachable() async throws {
        let harness = try await SimulatorHarness.start()
        let directory = try Fixtures.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let config = try Self.writeConfiguration(harness, in: directory)
        await harness.simulator.shutdown()
        let result = try await PushBridgeExecutable.run(["channels", "list", "--config", config, "--timeout", "2"])
        harness.tls.remove()
        #expect(result.status == 1)
        #expect(result.standardError.hasPrefix("error: no connection"), "one error line, no log noise")
    }
}
