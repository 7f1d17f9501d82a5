import APNSCore
import APNSSimulator
import Configuration
import Crypto
import Foundation
import TestSupport
import Testing

@testable import Bridge
@testable import BridgeCore

/// The bridge's sender for an app with `protocol: binary`, built from the configuration, against the simulator's
/// binary gateway over TLS with a client certificate.
@Suite("Binary sender from the configuration")
struct BinarySenderTests {
    static func token(_ index: Int) -> String {
        let hex = String(index, radix: 16)
        return String(repeating: "0", count: 64 - hex.count) + hex
    }

    static func notification(_ token: String, payload: [UInt8] = Array(#"{"aps":{}}"#.utf8)) -> APNSCore.Notification {
        Notification(deviceToken: token, topic: "com.example.app", pushType: .alert, id: UUID(), payload: payload)
    }

    func sender(gatewayPort: Int, tls: TestTLS) throws -> APNSSender {
        let yaml = """
            kafka:
              bootstrap_servers: embedded
            apns:
              auth: { type: token, key_file: \(try Self.p8Key()), key_id: ABC123DEFG, team_id: DEF123GHIJ }
            apps:
              legacy:
                protocol: binary
                ca_file: \(tls.caCertificatePath)
                connections: 2
                auth: { type: certificate, cert_file: \(tls.clientCertificatePath), key_file: \(tls.clientKeyPath) }
                endpoint: "127.0.0.1:\(gatewayPort)"
                binary: { payload_limit: 256, quiet_window: 1s }
            routes:
              - name: greeting
                input_topic: greetings
                app: legacy
                device_tokens: "{{token}}"
                topic: com.example.app
                payload: { aps: { alert: "{{text}}" } }

            """
        let configuration = try ConfigurationLoader(environment: [:], checksCredentialFiles: true)
            .load(yaml: yaml, file: "binary.yaml").configuration
        return try APNSSender(configuration: configuration, logger: quietLogger())
    }

    static func answer(_ result: APNSResult?) -> APNSResponse? {
        guard case .answered(let response) = result else { return nil }
        return response
    }

    static func p8Key() throws -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("binary-sender-\(UUID()).p8").path
        try Data(P256.Signing.PrivateKey().pemRepresentation.utf8).write(to: URL(fileURLWithPath: path))
        return path
    }

    @Test("an app with protocol: binary sends through its binary connections; the gateway's refusals come back")
    func sends() async throws {
        let tls = try TestTLS.generate()
        var behaviour = BinaryGatewayBehaviour()
        behaviour.unregisteredTokens = [Self.token(4)]
        let gateway = try await BinaryGateway.start(
            behaviour: behaviour, certificateChain: try tls.serverCertificateChain(),
            privateKey: try tls.serverPrivateKey(), clientCertificateTrustRoots: [try tls.caCertificate()])
        let sender = try self.sender(gatewayPort: gateway.port, tls: tls)
        let (stream, input) = AsyncStream.makeStream(of: (String, APNSResult).self)
        let batch = (0..<10).map { index in
            let notification = Self.notification(Self.token(index))
            return SendRequest(notification: notification, app: "legacy") {
                input.yield((notification.deviceToken, $0))
            }
        }
        sender.send(contentsOf: batch)
        var results: [String: APNSResult] = [:]
        let timeout = Task {
            try await Task.sleep(for: .seconds(30))
            input.finish()
        }
        for await (token, result) in stream {
            results[token] = result
            if results.count == 10 { break }
        }
        timeout.cancel()
        await sender.shutdown()
        await gateway.close()
        #expect(results.count == 10)
        #expect(Self.answer(results[Self.token(4)])?.reason == .badDeviceToken)
        #expect(results.values.filter { Self.answer($0)?.status == 200 }.count == 9)
    }

    @Test("the local check of a binary app is the binary protocol's: 32-byte tokens, its payload limit")
    func validates() throws {
        let tls = try TestTLS.generate()
        let sender = try self.sender(gatewayPort: 1, tls: tls)
        let big = Array(repeating: UInt8(ascii: "a"), count: 300)
        #expect(sender.validate(Self.notification("abcd"), payloadIsJSONObject: true, app: "legacy") == .badDeviceToken)
        #expect(
            sender.validate(Self.notification(Self.token(1), payload: big), payloadIsJSONObject: true, app: "legacy")
                == .payloadTooLarge)
        #expect(sender.validate(Self.notification(Self.token(1)), payloadIsJSONObject: true, app: "legacy") == nil)
        // The default block speaks HTTP/2: 300 bytes are fine there.
        #expect(
            sender.validate(Self.notification(Self.token(1), payload: big), payloadIsJSONObject: true, app: nil) == nil)
    }
}
