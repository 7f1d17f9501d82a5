import APNSCore
import APNSSimulator
import Foundation
import Kafka
import TestSupport
import Testing

@testable import DoctorChecks

/// `pushbridge doctor` against the mock cluster and the APNs simulator: a good setup passes every check, and each
/// broken setup fails on its own line.
@Suite(.timeLimit(.minutes(1)))
struct DoctorTests {
    @Test func goodSetupPassesEveryCheck() async throws {
        try await withDoctorSetup { setup in
            let checks = try await setup.doctor(try setup.configuration())
            #expect(checks.allSatisfy { $0.status == .ok }, "\(checks.map(\.description))")
            let names = checks.map(\.name)
            #expect(
                names == [
                    "apns credentials", "apns tcp", "apns tls", "apns auth", "apns clock", "kafka reachable",
                    "kafka topics",
                ]
            )
            #expect(checks.named("apns tls")?.found.contains("SETTINGS_MAX_CONCURRENT_STREAMS 1000") == true)
            #expect(checks.named("apns auth")?.found.contains("BadDeviceToken") == true)
        }
    }

    @Test func probeIsTheRequestTheBridgeSends() async throws {
        try await withDoctorSetup { setup in
            let checks = try await setup.doctor(try setup.configuration())
            #expect(checks.named("apns auth")?.status == .ok)
            let probe = try #require(
                setup.simulator.receivedRequests.first { $0.deviceToken == Doctor.probeDeviceToken })
            #expect(probe.path == Doctor.probeNotification(topic: DoctorSetup.bundleID).path)
            #expect(probe.apnsID.flatMap(UUID.init(uuidString:)) != nil, "an apns-id, as the bridge sends one")
            #expect(probe.status == 400)
        }
    }

    @Test func missingInputTopicFailsNamingIt() async throws {
        try await withDoctorSetup(createInputTopic: false) { setup in
            let checks = try await setup.doctor(try setup.configuration())
            let topics = try #require(checks.named("kafka topics"))
            #expect(topics.status == .fail)
            #expect(topics.found == "missing on the cluster: \(DoctorSetup.inputTopic)")
            #expect(topics.hint?.contains("kafka-topics.sh --create") == true)
            #expect(checks.named("kafka reachable")?.status == .ok)
        }
    }

    @Test func unreachableKafkaFailsWithinTheTimeout() async throws {
        try await withDoctorSetup { setup in
            let refusing = try RefusingPort()
            let address = "127.0.0.1:\(refusing.port)"
            defer { withExtendedLifetime(refusing) {} }
            let started = ContinuousClock.now
            let checks = try await setup.doctor(
                try setup.configuration(bootstrapServers: address), kafkaTimeout: .seconds(2))
            // Tells the 2 s Kafka timeout from a hang (the suite's limit is a minute): with the doctor's other
            // checks the run took 5.3 s under the parallel suite on an unloaded host, so the bound is halfway.
            #expect(ContinuousClock.now - started < .seconds(30))
            let reachable = try #require(checks.named("kafka reachable"))
            #expect(reachable.status == .fail)
            #expect(reachable.found.contains(address))
            #expect(checks.named("kafka topics")?.status == .warn)
        }
    }

    @Test func wrongSigningKeyFailsWithInvalidProviderToken() async throws {
        try await withDoctorSetup { setup in
            try setup.write(P256Key.generatePEM(), to: "Other.p8")
            let checks = try await setup.doctor(try setup.configuration(auth: setup.tokenAuth(keyFile: "Other.p8")))
            let auth = try #require(checks.named("apns auth"))
            #expect(auth.status == .fail)
            #expect(auth.found.contains("403 InvalidProviderToken"))
            #expect(checks.named("apns credentials")?.status == .ok)
        }
    }

    @Test func everyAppIsCheckedOnItsOwnLines() async throws {
        try await withDoctorSetup { setup in
            try setup.write(P256Key.generatePEM(), to: "Other.p8")
            let apps = """
                apps:
                  second:
                    environment: sandbox
                    endpoint: https://127.0.0.1:\(setup.simulator.port)
                    ca_file: \(setup.tls.caCertificatePath)
                    auth:
                      type: token
                      key_file: \(setup.directory.appendingPathComponent("Other.p8").path)
                      key_id: \(DoctorSetup.keyID)
                      team_id: \(DoctorSetup.teamID)
                """
            let checks = try await setup.doctor(try setup.configuration(apps: apps))
            #expect(checks.named("apns auth")?.status == .ok)
            #expect(checks.named("apps.second tls")?.status == .ok)
            let auth = try #require(checks.named("apps.second auth"))
            #expect(auth.status == .fail)
            #expect(auth.found.contains("InvalidProviderToken"))
        }
    }

    @Test func untrustedServerCertificateFailsTLS() async throws {
        try await withDoctorSetup { setup in
            let checks = try await setup.doctor(try setup.configuration(trustsSimulatorCA: false))
            let tls = try #require(checks.named("apns tls"))
            #expect(tls.status == .fail)
            #expect(tls.hint?.contains("ca_file") == true)
            #expect(checks.named("apns tcp")?.status == .ok)
            #expect(checks.named("apns auth") == nil)
        }
    }

    @Test func expiredClientCertificateFails() async throws {
        try await withDoctorSetup { setup in
            let auth = try setup.certificateAuth(
                notBefore: Date().addingTimeInterval(-400 * 86_400), notAfter: Date().addingTimeInterval(-86_400))
            let checks = try await setup.doctor(try setup.configuration(auth: auth))
            let expiry = try #require(checks.named("apns certificate expiry"))
            #expect(expiry.status == .fail)
            #expect(expiry.found.contains("expired on"))
        }
    }

    @Test func clientCertificateExpiringWithin30DaysWarns() async throws {
        try await withDoctorSetup { setup in
            let auth = try setup.certificateAuth(
                notBefore: Date().addingTimeInterval(-86_400), notAfter: Date().addingTimeInterval(10 * 86_400 + 3600))
            let checks = try await setup.doctor(try setup.configuration(auth: auth))
            let expiry = try #require(checks.named("apns certificate expiry"))
            #expect(expiry.status == .warn)
            #expect(expiry.found.contains("expires in 10 days"))
            #expect(checks.named("apns certificate environment and topics")?.status == .warn)
        }
    }

    @Test func p12ClientCertificateIsAcceptedOverMutualTLS() async throws {
        try await withDoctorSetup(acceptsClientCertificates: true) { setup in
            let auth = try await setup.p12Auth(exportedWith: "p12-pass", password: "p12-pass")
            let checks = try await setup.doctor(try setup.configuration(auth: auth))
            #expect(checks.named("apns credentials")?.status == .ok)
            // TestTLS certificates are valid for 29 days, inside the 30-day warning.
            #expect(checks.named("apns certificate expiry")?.status == .warn)
            #expect(checks.named("apns tls")?.status == .ok)
            let accepted = try #require(checks.named("apns auth"))
            #expect(accepted.status == .ok, "\(accepted)")
            #expect(accepted.found.contains("client certificate"))
            // The test CA's certificate carries none of Apple's extensions: nothing to compare, so a warning.
            #expect(checks.named("apns certificate environment and topics")?.status == .warn)
        }
    }

    @Test func p12WithTheWrongPasswordFails() async throws {
        try await withDoctorSetup { setup in
            let auth = try await setup.p12Auth(exportedWith: "p12-pass", password: "not-the-pass")
            let checks = try await setup.doctor(try setup.configuration(auth: auth))
            let credentials = try #require(checks.named("apns credentials"))
            #expect(credentials.status == .fail)
            #expect(credentials.hint?.contains("p12_password") == true)
            #expect(!credentials.description.contains("not-the-pass"))
        }
    }

    @Test func productionCertificateWithSandboxEnvironmentFails() async throws {
        try await withDoctorSetup { setup in
            let auth = try setup.certificateAuth(userID: DoctorSetup.bundleID, marks: [.production])
            let checks = try await setup.doctor(try setup.configuration(auth: auth))
            let environment = try #require(checks.named("apns certificate environment and topics"))
            #expect(environment.status == .fail)
            #expect(environment.found == "a production certificate, but environment is sandbox")
            #expect(checks.named("apns certificate expiry")?.status == .ok)
        }
    }

    @Test func certificateOfAnotherBundleFailsNamingTheRoutesTopic() async throws {
        try await withDoctorSetup { setup in
            let auth = try setup.certificateAuth(userID: "com.example.other", marks: [.development])
            let checks = try await setup.doctor(try setup.configuration(auth: auth))
            let topics = try #require(checks.named("apns certificate environment and topics"))
            #expect(topics.status == .fail)
            #expect(topics.found == "routes use com.example.app, the certificate covers com.example.other")
        }
    }

    @Test func universalCertificateListingTheTopicPasses() async throws {
        try await withDoctorSetup { setup in
            let auth = try setup.certificateAuth(
                userID: "com.example.app", marks: [.topics(["com.example.app", "com.example.app.voip"])])
            let checks = try await setup.doctor(try setup.configuration(auth: auth))
            let topics = try #require(checks.named("apns certificate environment and topics"))
            #expect(topics.status == .ok, "\(topics)")
            #expect(topics.found.contains("com.example.app, com.example.app.voip"))
        }
    }

    @Test func unparseableKeyFileFails() async throws {
        try await withDoctorSetup { setup in
            try setup.write("-----BEGIN PRIVATE KEY-----\nnot a key\n-----END PRIVATE KEY-----\n", to: "Broken.p8")
            let checks = try await setup.doctor(try setup.configuration(auth: setup.tokenAuth(keyFile: "Broken.p8")))
            let credentials = try #require(checks.named("apns credentials"))
            #expect(credentials.status == .fail)
            #expect(credentials.found.contains("Broken.p8"))
            #expect(credentials.hint?.contains(".p8") == true)
            #expect(checks.named("apns auth")?.status == .warn)
        }
    }

    @Test func clockSkewAboveTenMinutesFails() async throws {
        try await withDoctorSetup(simulatorClock: ShiftedClock(offset: -15 * 60)) { setup in
            let checks = try await setup.doctor(try setup.configuration())
            let clock = try #require(checks.named("apns clock"))
            #expect(clock.status == .fail)
            #expect(clock.found.contains("15 min ahead of"))
        }
    }

    @Test func clockSkewAboveOneMinuteWarns() async throws {
        try await withDoctorSetup(simulatorClock: ShiftedClock(offset: 3 * 60)) { setup in
            let checks = try await setup.doctor(try setup.configuration())
            let clock = try #require(checks.named("apns clock"))
            #expect(clock.status == .warn)
            #expect(clock.found.contains("behind"))
        }
    }
}

/// Pure parts: the date header, Apple's topics extension, the output line.
struct DoctorPartsTests {
    @Test func httpDateRoundTrips() throws {
        let date = Date(timeIntervalSince1970: 784_111_777)
        #expect(HTTPDate.format(date) == "Sun, 06 Nov 1994 08:49:37 GMT")
        #expect(HTTPDate.parse("Sun, 06 Nov 1994 08:49:37 GMT") == date)
        #expect(HTTPDate.parse("Sunday, 06-Nov-94 08:49:37 GMT") == nil)
    }

    @Test func topicsExtensionListsTheTopicStrings() {
        func utf8(_ text: String) -> [UInt8] { [0x0C, UInt8(text.utf8.count)] + Array(text.utf8) }
        func sequence(_ content: [UInt8]) -> [UInt8] { [0x30, UInt8(content.count)] + content }
        let value = sequence(
            utf8("com.example.app") + sequence(utf8("app")) + utf8("com.example.app.voip") + sequence(utf8("voip")))
        #expect(CertificateInspection.topics(inExtensionValue: value) == ["com.example.app", "com.example.app.voip"])
        #expect(CertificateInspection.topics(inExtensionValue: [0x30, 0x05, 0x0C]) == [])
    }

    @Test func failingLineCarriesItsFixOnOneLine() {
        let line = DoctorCheck(.fail, "kafka topics", "missing: a\nb", hint: "create them").description
        #expect(line == "FAIL kafka topics: missing: a b (fix: create them)")
        #expect(DoctorCheck(.ok, "apns tcp", "connects", hint: "unused").description == "ok   apns tcp: connects")
    }
}

/// `pushbridge doctor` as a user runs it: one line per check, and the exit status.
@Suite(.timeLimit(.minutes(1)))
struct DoctorCommandTests {
    @Test func goodSetupPrintsOneOKLinePerCheckAndExitsZero() async throws {
        try await withDoctorSetup { setup in
            let result = try await PushBridgeExecutable.run(["doctor", "--config", try setup.configuration()])
            #expect(result.status == 0, "\(result.standardOutput)\(result.standardError)")
            let lines = result.standardOutput.split(separator: "\n")
            #expect(lines.count == 8)
            #expect(lines.dropLast().allSatisfy { $0.hasPrefix("ok   ") })
            #expect(lines.last == "7 checks: 0 failed, 0 warnings")
        }
    }

    @Test func unparseableKeyFileIsAFailingCheckAndExitsOne() async throws {
        try await withDoctorSetup { setup in
            try setup.write("not a key\n", to: "Broken.p8")
            let path = try setup.configuration(auth: setup.tokenAuth(keyFile: "Broken.p8"))
            let result = try await PushBridgeExecutable.run(["doctor", "--config", path, "--kafka-timeout", "2"])
            #expect(result.status == 1, "\(result.standardOutput)\(result.standardError)")
            #expect(result.standardOutput.contains("FAIL apns credentials: \(setup.directory.path)/Broken.p8"))
            #expect(result.standardOutput.contains("(fix: "))
        }
    }

    @Test func invalidConfigurationExitsTwo() async throws {
        try await withDoctorSetup { setup in
            let path = try setup.write("kafka:\n  bootstrap_servers: x\n  no_such_key: 1\n", to: "bad.yaml")
            let result = try await PushBridgeExecutable.run(["doctor", "--config", path])
            #expect(result.status == 2)
            #expect(result.standardError.contains("no_such_key"))
        }
    }
}

/// `pushbridge doctor`'s check of the broadcast channels that routes name as fixed IDs (issue 15), against the
/// simulator's channel management API.
@Suite(.timeLimit(.minutes(1)))
struct DoctorChannelTests {
    static let existing = Data(repeating: 5, count: 16).base64EncodedString()
    static let missing = Data(repeating: 6, count: 16).base64EncodedString()

    /// A broadcast route named `name` sending to `channel`.
    static func route(_ name: String, channel: String, setup: DoctorSetup) -> String {
        """
          - name: \(name)
            input_topic: \(setup.topicPrefix + DoctorSetup.inputTopic)
            channel_id: "\(channel)"
            topic: \(DoctorSetup.bundleID)
            push_type: liveactivity
            payload: { aps: { event: update } }
        """
    }

    /// `apns.broadcast` pointing the management endpoint at `port` (the simulator serves both APIs).
    static func management(port: Int) -> String {
        "  broadcast: { management_endpoint: \"127.0.0.1:\(port)\" }"
    }

    @Test func aFixedChannelThatExistsPassesAndTemplatedOnesAreNotChecked() async throws {
        try await withDoctorSetup(
            channels: [.init(bundleID: DoctorSetup.bundleID, channelID: Self.existing, storagePolicy: 1)]
        ) { setup in
            let path = try setup.configuration(
                apns: Self.management(port: setup.simulator.port),
                routes: Self.route("fixed", channel: Self.existing, setup: setup) + "\n"
                    + Self.route("per-event", channel: "{{match.channel}}", setup: setup))
            let checks = try await setup.doctor(path)
            let received = setup.simulator.statistics
            #expect(checks.allSatisfy { $0.status == .ok }, "\(checks.map(\.description))")
            let channel = try #require(checks.named("apns channel fixed"))
            #expect(channel.found.contains(Self.existing))
            #expect(channel.found.contains("storage policy 1"))
            #expect(checks.named("apns channel per-event") == nil, "a channel rendered from events cannot be known")
            #expect(received.byStatus[200] != nil)
        }
    }

    @Test func aFixedChannelThatDoesNotExistFailsNamingRouteAndChannel() async throws {
        try await withDoctorSetup(
            channels: [.init(bundleID: DoctorSetup.bundleID, channelID: Self.existing, storagePolicy: 0)]
        ) { setup in
            let path = try setup.configuration(
                apns: Self.management(port: setup.simulator.port),
                routes: Self.route("gone", channel: Self.missing, setup: setup))
            let checks = try await setup.doctor(path)
            let channel = try #require(checks.named("apns channel gone"), "\(checks.map(\.description))")
            #expect(channel.status == .fail)
            #expect(channel.found.contains("route gone sends to channel \(Self.missing)"), "\(channel)")
            #expect(channel.found.contains("ChannelNotRegistered"))
            #expect(channel.hint?.contains("pushbridge channels create") == true)
            #expect(channel.hint?.contains("routes[1].channel_id") == true, "\(channel)")
            #expect(
                checks.filter { $0.status != .ok }.map(\.name) == ["apns channel gone"], "\(checks.map(\.description))")
        }
    }

    @Test func anUnreachableManagementEndpointFailsWithTheKeyToFix() async throws {
        try await withDoctorSetup { setup in
            let path = try setup.configuration(
                apns: Self.management(port: 1), routes: Self.route("fixed", channel: Self.existing, setup: setup))
            let checks = try await setup.doctor(path)
            let channel = try #require(checks.named("apns channel fixed"), "\(checks.map(\.description))")
            #expect(channel.status == .fail)
            #expect(channel.found.contains("could not read channel"))
            #expect(channel.hint?.contains("broadcast.management_endpoint") == true)
        }
    }
}
