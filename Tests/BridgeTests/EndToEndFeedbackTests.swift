import APNSSimulator
import BinaryProvider
import Foundation
import Kafka
import TestSupport
import TestWaiting
import Testing

@testable import Bridge
@testable import BridgeCore

/// Issue 14's proof: `pushbridge run` (the built executable, as a child process) with a binary app against the
/// simulator's binary gateway and feedback service over TLS with a client certificate, over Kafka (the mock
/// cluster): outcomes for every event, invalid-token records from both error packets (v1) and the feedback service
/// (v2), and commits at the end offsets.
@Suite("End to end: the binary protocol's feedback service", .serialized, .timeLimit(.minutes(3)))
struct EndToEndFeedbackTests {
    @Test(
        "outcomes, invalid-token records from error packets (v1) and from the feedback service (v2), commits at the end"
    )
    func feedbackEndToEnd() async throws {
        try await withEndToEnd { world in
            let count = 30
            let dead = [EndToEnd.token(7), EndToEnd.token(19)]
            let onlyFeedback = FeedbackTuple(
                timeEpochSeconds: 1_700_000_000, token: [UInt8](repeating: 0xFE, count: 32))
            var behaviour = BinaryGatewayBehaviour()
            behaviour.unregisteredTokens = Set(dead)
            behaviour.feedbackTokens = [onlyFeedback]
            let (gateway, feedback) = try await world.tls.startBinarySimulator(behaviour)
            defer {
                Task {
                    await feedback.close()
                    await gateway.close()
                }
            }
            let perPartition = try await world.produce((0..<count).map { EndToEnd.alert([EndToEnd.token($0)]) })
            let feedbackSection = #"feedback: { endpoint: "127.0.0.1:\#(feedback.port)", interval: 1s, timeout: 5s }"#
            let path = try world.binaryConfiguration(
                gatewayPort: gateway.port, binary: "{ quiet_window: 500ms, \(feedbackSection) }",
                logLevel: "info")
            let log = world.directory.appendingPathComponent("run.log")
            let bridge = try BridgeProcess.start(configurationPath: path, log: log)
            let feedbackTokens = Set(dead + [onlyFeedback.deviceToken])
            let results = try await world.results(timeout: .seconds(90)) { results in
                let v2 = results.invalidTokens.filter { $0["schema"] == "pushbridge.invalid-token.v2" }
                return results.outcomes.count >= count && Set(v2.compactMap { $0["device_token"] }) == feedbackTokens
                    && results.invalidTokens.count >= 2 + feedbackTokens.count
            }
            // The end offsets are committed while it runs (every commit_interval), and again on the way out.
            _ = try await eventually(timeout: .seconds(30), every: .milliseconds(200)) {
                (try? await world.committed()) == perPartition
            }
            bridge.kill(signal: SIGTERM)
            let status = await bridge.waitForExit()
            let output = (try? String(contentsOf: log, encoding: .utf8)) ?? ""
            #expect(status == 0, "\(output)")

            // Outcomes: every notification once; the gateway's refusals are rejected.
            #expect(results.notificationIDs.count == count)
            #expect(results.outcomes.filter { $0.status == "delivered" }.count == count - dead.count)
            #expect(Set(results.outcomes.filter { $0.status == "rejected" }.map(\.token)) == Set(dead))
            #expect(results.outcomes.filter { $0.status == "rejected" }.allSatisfy { $0.reason == "BadDeviceToken" })

            // Invalid tokens: v1 from the error packets, v2 from the feedback service (its own token and the refused
            // ones, reported after the gateway refused them).
            let v1 = results.invalidTokenMessages.filter {
                Results.strings($0.value)["schema"] == "pushbridge.invalid-token.v1"
            }
            let v2 = results.invalidTokenMessages.filter {
                Results.strings($0.value)["schema"] == "pushbridge.invalid-token.v2"
            }
            #expect(v1.count + v2.count == results.invalidTokenMessages.count)
            #expect(Set(v1.map { Results.strings($0.value)["device_token"] ?? "" }) == Set(dead))
            #expect(Set(v2.map { Results.strings($0.value)["device_token"] ?? "" }) == feedbackTokens)
            for message in v2 {
                let record = Results.strings(message.value)
                #expect(record["reason"] == "Unregistered")
                #expect(record["apns_topic"] == "com.example.app", "the topic the app's routes send to")
                #expect(record["notification_id"] == nil && record["route"] == nil && record["source"] == nil)
                #expect(
                    message.headers.contains { $0.name == "pushbridge-protocol" && $0.value == Array("binary".utf8) })
            }
            let own = v2.first { Results.strings($0.value)["device_token"] == onlyFeedback.deviceToken }
            #expect(own.map { Results.strings($0.value)["invalid_since"] } == "2023-11-14T22:13:20.000Z")
            let report = try await RecordSchemas.validate(
                v1.map { (.invalidToken, $0.value ?? []) } + v2.map { (.invalidTokenV2, $0.value ?? []) })
            #expect(report.problems == [])

            // Commits at the end offsets; nothing the gateway processed was written twice.
            #expect(try await world.committed() == perPartition)
            #expect(gateway.statistics.processedCount == count - dead.count)
            #expect(feedback.statistics.connections >= 2, "polled at start and again every interval")
            #expect(output.contains("Polled the feedback service"))
            #expect(
                !output.contains(dead[0]) && !output.contains(onlyFeedback.deviceToken), "tokens are logged shortened")
        }
    }

    @Test(
        "renewing a binary app's certificate in place: the feedback poller's next polls present the new one, and what the service reports then is published"
    )
    func certificateRenewalReachesThePoller() async throws {
        try await withEndToEnd { world in
            let dead = EndToEnd.token(0xDEAD)
            var behaviour = BinaryGatewayBehaviour()
            behaviour.unregisteredTokens = [dead]
            let (gateway, feedback) = try await world.tls.startBinarySimulator(behaviour)
            defer {
                Task {
                    await feedback.close()
                    await gateway.close()
                }
            }
            // The certificate and key files a Secret mounts, replaced in place at the renewal.
            let certificateFile = world.directory.appendingPathComponent("legacy.pem").path
            let keyFile = world.directory.appendingPathComponent("legacy-key.pem").path
            try FileManager.default.copyItem(atPath: world.tls.clientCertificatePath, toPath: certificateFile)
            try FileManager.default.copyItem(atPath: world.tls.clientKeyPath, toPath: keyFile)
            let old = try TestTLS.simulatorFingerprint(ofCertificateAt: certificateFile)
            let feedbackSection = #"feedback: { endpoint: "127.0.0.1:\#(feedback.port)", interval: 1s, timeout: 5s }"#
            let path = try world.binaryConfiguration(
                gatewayPort: gateway.port, binary: "{ quiet_window: 500ms, \(feedbackSection) }", logLevel: "info")
            let yaml = try String(contentsOfFile: path, encoding: .utf8)
                .replacingOccurrences(of: world.tls.clientCertificatePath, with: certificateFile)
                .replacingOccurrences(of: world.tls.clientKeyPath, with: keyFile)
            try Data(yaml.utf8).write(to: URL(fileURLWithPath: path))
            let log = world.directory.appendingPathComponent("renewal.log")
            let bridge = try BridgeProcess.start(configurationPath: path, log: log)
            defer { bridge.kill(signal: SIGKILL) }
            func polls(_ fingerprint: String) -> Int {
                feedback.statistics.connectionsByClientCertificate[fingerprint, default: 0]
            }
            /// Waits until the service was polled `count` times with the certificate of `fingerprint`.
            func waitForPolls(_ count: Int, _ fingerprint: String) async throws {
                try #require(
                    await feedback.waitForStatistics(timeout: .seconds(60)) {
                        $0.connectionsByClientCertificate[fingerprint, default: 0] >= count
                    }, "\(count) polls with \(fingerprint)")
            }
            try await waitForPolls(2, old)

            let renewed = try world.tls.issueClientCertificate(commonName: "legacy-2027")
            let new = try TestTLS.simulatorFingerprint(ofCertificateAt: renewed.certificatePath)
            guard rename(renewed.keyPath, keyFile) == 0, rename(renewed.certificatePath, certificateFile) == 0 else {
                Issue.record("the renewed files could not be renamed into place")
                return
            }
            try await bridge.waitForOutput(containing: "reload.feedback=apps.legacy")
            // The new poller polls at once and then every second; the old one stopped after its poll in progress.
            try await waitForPolls(2, new)
            let oldPolls = polls(old)

            // A token the gateway refuses now reaches the feedback service, and the new poller publishes it.
            try await world.produce([EndToEnd.alert([dead])])
            let results = try await world.results(timeout: .seconds(60)) { results in
                results.invalidTokens.contains {
                    $0["schema"] == "pushbridge.invalid-token.v2" && $0["device_token"] == dead
                }
            }
            try await waitForPolls(4, new)
            bridge.kill(signal: SIGTERM)
            let status = await bridge.waitForExit()
            let output = (try? String(contentsOf: log, encoding: .utf8)) ?? ""
            #expect(status == 0, "\(output)")
            #expect(polls(old) == oldPolls, "the replaced poller polled again")
            #expect(feedback.statistics.connectionsByClientCertificate.keys.sorted() == [old, new].sorted())
            #expect(results.outcomes.map(\.status) == ["rejected"])
            #expect(output.components(separatedBy: "Configuration reloaded").count == 2, "one reload")
            #expect(!output.contains("Polling the feedback service failed"))
        }
    }
}
