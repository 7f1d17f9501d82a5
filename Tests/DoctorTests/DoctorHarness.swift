import APNSCore
import APNSSimulator
import Configuration
import Crypto
import DoctorChecks
import Foundation
import Kafka
import Logging
import SwiftASN1
import TestSupport
import X509

/// A production-like setup for `pushbridge doctor`, on a ``TestWorld``: librdkafka's mock cluster (or a real broker
/// shared by a suite) with the topics, the APNs simulator over TLS + HTTP/2 (answering the all-zero token
/// `BadDeviceToken`, as APNs does), a `.p8` key it trusts, and a configuration file pointing at both. Each knob
/// breaks one thing. Open one with ``withDoctorSetup(createInputTopic:simulatorClock:acceptsClientCertificates:broker:channels:_:)``.
struct DoctorSetup: Sendable {
    static let keyID = "DOCTORKEY1"
    static let teamID = "DOCTORTEAM"
    static let inputTopic = "events"
    static let bundleID = "com.example.app"

    /// The broker, the simulator and the directory.
    let world: TestWorld

    /// The broker: a mock cluster of this setup's own, or a broker shared with other tests.
    var broker: any TestKafkaBroker { self.world.broker }
    /// Prefixed to every topic name on a shared broker, so that each setup has topics of its own.
    var topicPrefix: String { self.world.topicPrefix }
    var simulator: APNSSimulatorServer { self.world.simulator }
    var tls: TestTLS { self.world.tls }
    var directory: URL { self.world.directory }

    /// What ``withDoctorSetup(createInputTopic:simulatorClock:acceptsClientCertificates:broker:channels:_:)``
    /// opens: the cluster (with the input topic unless `createInputTopic` is false) and the simulator, whose clock
    /// is `simulatorClock`. With `acceptsClientCertificates`, the simulator authenticates clients by certificates
    /// the test CA signed. With `broker`, the topics are made there instead of on a new mock cluster, with names of
    /// this setup's own.
    static func world(
        createInputTopic: Bool, simulatorClock: any WallClock, acceptsClientCertificates: Bool,
        broker: (any TestKafkaBroker)?, channels: [SimulatorScenario.Channel]
    ) -> TestWorld.Configuration {
        var scenario = SimulatorScenario()
        scenario.topics = [Self.bundleID]
        scenario.badTokens = [Doctor.probeDeviceToken]
        scenario.channels = channels
        scenario.receiveLogLimit = 100  // doctor sends a handful of requests; tests read them back
        return TestWorld.Configuration(
            topics: (createInputTopic ? [(name: Self.inputTopic, partitions: Int32(2))] : [])
                + TestWorld.resultTopicNames.map { ($0, 1) },
            scenario: scenario, keyID: Self.keyID, teamID: Self.teamID, tlsName: "Doctor Test",
            acceptsClientCertificates: acceptsClientCertificates, simulatorClock: simulatorClock, broker: broker,
            sharedTopicPrefix: "doctor")
    }

    /// Writes `text` into the setup's directory; returns the path.
    @discardableResult
    func write(_ text: String, to name: String) throws -> String {
        try self.world.write(text, to: name)
    }

    /// The token `auth:` block with `keyFile` (a name in the directory).
    func tokenAuth(keyFile: String = "AuthKey.p8") -> String {
        """
        auth:
            type: token
            key_file: \(self.world.path(keyFile))
            key_id: \(Self.keyID)
            team_id: \(Self.teamID)
        """
    }

    /// Writes a configuration file; returns its path.
    func configuration(
        bootstrapServers: String? = nil,
        auth: String? = nil,
        trustsSimulatorCA: Bool = true,
        apps: String = "",
        apns extraAPNS: String = "",
        routes extraRoutes: String = ""
    ) throws -> String {
        let authBlock = (auth ?? self.tokenAuth()).split(separator: "\n").map { "  \($0)" }.joined(separator: "\n")
        let yaml = """
            kafka:
              bootstrap_servers: "\(bootstrapServers ?? self.broker.bootstrapServers)"
            apns:
              environment: sandbox
              endpoint: https://127.0.0.1:\(self.simulator.port)
            \(trustsSimulatorCA ? "  ca_file: \(self.tls.caCertificatePath)" : "")
            \(authBlock)
            \(extraAPNS)
            \(apps)
            routes:
              - name: alerts
                input_topic: \(self.world.topic(Self.inputTopic))
                device_tokens: "{{token}}"
                topic: \(Self.bundleID)
                payload:
                  aps:
                    alert: "{{text}}"
            \(extraRoutes)
            outcomes:
              topic: \(self.world.topic(TestWorld.resultTopicNames[0]))
              invalid_tokens_topic: \(self.world.topic(TestWorld.resultTopicNames[1]))
              dead_letter_topic: \(self.world.topic(TestWorld.resultTopicNames[2]))
            admin:
              listen: 127.0.0.1:0

            """
        return try self.write(yaml, to: "pushbridge-\(UUID().uuidString).yaml")
    }

    /// Loads `path` as `pushbridge doctor` does (credential files are the doctor's to judge) and runs the checks.
    func doctor(_ path: String, kafkaTimeout: Duration = .seconds(5)) async throws -> [DoctorCheck] {
        let loaded = try ConfigurationLoader(checksCredentialFiles: false).load(file: path)
        let doctor = Doctor(
            configuration: loaded.configuration,
            options: Doctor.Options(kafkaTimeout: kafkaTimeout, apnsTimeout: .seconds(5))
        )
        return await doctor.run()
    }

    /// The `auth:` block for the test CA's client certificate as a `.p12` bundle opened with `password`.
    func p12Auth(exportedWith exportPassword: String, password: String) async throws -> String {
        let path = try await self.tls.exportClientP12(password: exportPassword)
        return """
            auth:
                type: certificate
                p12_file: \(path)
                p12_password: \(password)
            """
    }

    /// Apple's marks on an APNs certificate.
    enum AppleMark {
        case development
        case production
        case voip
        /// The "Sandbox & Production" topics extension listing `topics`.
        case topics([String])

        var certificateExtension: Certificate.Extension {
            switch self {
            case .development:
                return Certificate.Extension(oid: [1, 2, 840, 113_635, 100, 6, 3, 1], critical: false, value: [5, 0])
            case .production:
                return Certificate.Extension(oid: [1, 2, 840, 113_635, 100, 6, 3, 2], critical: false, value: [5, 0])
            case .voip:
                return Certificate.Extension(oid: [1, 2, 840, 113_635, 100, 6, 3, 4], critical: false, value: [5, 0])
            case .topics(let topics):
                // SEQUENCE { UTF8String topic, SEQUENCE { UTF8String "app" } ... } (short forms only).
                let content = topics.flatMap { topic -> [UInt8] in
                    [0x0C, UInt8(topic.utf8.count)] + Array(topic.utf8) + [0x30, 0x05, 0x0C, 0x03] + Array("app".utf8)
                }
                return Certificate.Extension(
                    oid: [1, 2, 840, 113_635, 100, 6, 3, 6], critical: false,
                    value: ArraySlice([0x30, UInt8(content.count)] + content)
                )
            }
        }
    }

    /// A self-signed client certificate valid from `notBefore` to `notAfter`, with the subject's UID `userID` and
    /// Apple's `marks`, written with its key as PEM; returns the `auth:` block using them.
    func certificateAuth(
        notBefore: Date = Date().addingTimeInterval(-86_400),
        notAfter: Date = Date().addingTimeInterval(365 * 86_400),
        userID: String? = nil,
        marks: [AppleMark] = []
    ) throws -> String {
        let key = P256.Signing.PrivateKey()
        var attributes = [
            RelativeDistinguishedName.Attribute(type: .RDNAttributeType.commonName, utf8String: "Apple Push Services")
        ]
        if let userID {
            attributes.append(.init(type: [0, 9, 2342, 19_200_300, 100, 1, 1], utf8String: userID))
        }
        let name = try DistinguishedName(attributes)
        var extensions = try Certificate.Extensions {
            Critical(BasicConstraints.notCertificateAuthority)
            Critical(KeyUsage(digitalSignature: true))
            try ExtendedKeyUsage([.clientAuth])
        }
        for mark in marks {
            try extensions.append(mark.certificateExtension)
        }
        let certificate = try Certificate(
            version: .v3,
            serialNumber: Certificate.SerialNumber(),
            publicKey: .init(key.publicKey),
            notValidBefore: notBefore,
            notValidAfter: notAfter,
            issuer: name,
            subject: name,
            signatureAlgorithm: .ecdsaWithSHA256,
            extensions: extensions,
            issuerPrivateKey: .init(key)
        )
        let certificatePath = try self.write(try certificate.serializeAsPEM().pemString, to: "push-cert.pem")
        let keyPath = try self.write(key.pemRepresentation, to: "push-key.pem")
        return """
            auth:
                type: certificate
                cert_file: \(certificatePath)
                key_file: \(keyPath)
            """
    }
}

/// Opens a ``DoctorSetup`` (``DoctorSetup/world(createInputTopic:simulatorClock:acceptsClientCertificates:broker:channels:)``),
/// runs `body` with it, and closes its world when `body` returns or throws.
func withDoctorSetup<Result>(
    createInputTopic: Bool = true,
    simulatorClock: any WallClock = SystemWallClock(),
    acceptsClientCertificates: Bool = false,
    broker: (any TestKafkaBroker)? = nil,
    channels: [SimulatorScenario.Channel] = [],
    _ body: (DoctorSetup) async throws -> Result
) async throws -> Result {
    let world = DoctorSetup.world(
        createInputTopic: createInputTopic, simulatorClock: simulatorClock,
        acceptsClientCertificates: acceptsClientCertificates, broker: broker, channels: channels)
    return try await withTestWorld(world) { world in try await body(DoctorSetup(world: world)) }
}

/// A clock `offset` away from the system's.
struct ShiftedClock: WallClock {
    var offset: TimeInterval

    func now() -> Date { Date().addingTimeInterval(self.offset) }
}

extension [DoctorCheck] {
    /// The check named `name`.
    func named(_ name: String) -> DoctorCheck? {
        self.first { $0.name == name }
    }
}

/// Fresh P-256 keys as `.p8` PEM text.
enum P256Key {
    static func generatePEM() -> String { P256.Signing.PrivateKey().pemRepresentation }
}
