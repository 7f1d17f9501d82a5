import APNSClient
import APNSCore
import APNSSimulator
import Foundation
import HTTP2
import TestSupport
import Testing

@Suite("Simulator server", .timeLimit(.minutes(1)))
struct SimulatorServerTests {
    @Test("GET /_simulator/stats answers the counts as JSON")
    func statisticsEndpoint() async throws {
        let harness = try await SimulatorHarness.start()
        let client = harness.client()
        _ = await client.send(Fixtures.notification())
        _ = await client.send(Fixtures.notification(token: "abc"))
        await client.shutdown()
        let connection = try await HTTP2ClientConnection.connect(
            configuration: HTTP2ClientConfiguration(
                host: "127.0.0.1",
                port: harness.simulator.port,
                tls: HTTP2ClientTLS(additionalTrustRootsPEMFile: harness.tls.caCertificatePath, trustSystemRoots: false)
            )
        )
        let response = try await connection.send(HTTP2Request(method: "GET", path: APNSSimulatorServer.statisticsPath))
        await connection.close()
        await harness.stop()
        #expect(response.status == 200)
        let object = try #require(try JSONSerialization.jsonObject(with: Data(response.body)) as? [String: Any])
        #expect(object["requests_received"] as? Int == 1)
        let byStatus = try #require(object["by_status"] as? [String: Any])
        #expect(byStatus["200"] as? Int == 1)
    }

    @Test("a self-signed certificate is written and serves TLS for 127.0.0.1")
    func selfSigned() async throws {
        let directory = try Fixtures.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let certificate = try SelfSignedCertificate.generate(in: directory)
        let simulator = try await APNSSimulatorServer.start(
            scenario: SimulatorScenario(),
            certificatePEMPath: certificate.certificatePath,
            privateKeyPEMPath: certificate.privateKeyPath
        )
        let connection = try await HTTP2ClientConnection.connect(
            configuration: HTTP2ClientConfiguration(
                host: "127.0.0.1",
                port: simulator.port,
                tls: HTTP2ClientTLS(additionalTrustRootsPEMFile: certificate.certificatePath, trustSystemRoots: false)
            )
        )
        let notification = Fixtures.notification()
        let response = try await connection.send(
            HTTP2Request(
                path: notification.path,
                headers: notification.apnsHeaders.map { HTTP2Header($0.name, $0.value) },
                body: notification.payload
            )
        )
        await connection.close()
        await simulator.shutdown()
        #expect(response.status == 403)
        #expect(ErrorBody.parse(response.body)?.reason == .missingProviderToken)
    }
}
