import APNSSimulator
import BinaryProvider
import Foundation
import TestSupport
import Testing

/// `pushbridge run` (in process) over Kafka (the mock cluster) with a route whose app speaks the binary protocol
/// to the simulator's binary gateway: every event accounted for, invalid tokens recorded, commits at the end.
@Suite("End to end with a binary app")
struct EndToEndBinaryTests {
    @Test(
        "outcomes for every notification, an invalid-token record for the token the gateway refuses, commits at the end"
    )
    func binaryApp() async throws {
        // A method rather than a closure: Swift 6.3.1's SendNonSendable pass crashes (map::at) on this body as a
        // closure.
        try await withEndToEnd { try await self.binaryApp(in: $0) }
    }

    func binaryApp(in world: EndToEnd) async throws {
        let count = 30
        let dead = EndToEnd.token(7)
        var behaviour = BinaryGatewayBehaviour()
        behaviour.unregisteredTokens = [dead]
        let gateway = try await BinaryGateway.start(
            behaviour: behaviour, certificateChain: try world.tls.serverCertificateChain(),
            privateKey: try world.tls.serverPrivateKey(), clientCertificateTrustRoots: [try world.tls.caCertificate()])
        defer { Task { await gateway.close() } }
        let perPartition = try await world.produce((0..<count).map { EndToEnd.alert([EndToEnd.token($0)]) })
        let path = try world.binaryConfiguration(
            gatewayPort: gateway.port, binary: "{ quiet_window: 1s, feedback: { enabled: false } }")
        let complete: @Sendable (Results) -> Bool = { $0.outcomes.count >= count && !$0.invalidTokens.isEmpty }
        try await world.withBridge(configurationPath: path) { _ in
            _ = try await world.results(until: complete)
        }
        let results = try await world.results(until: complete)
        #expect(results.notificationIDs.count == count)
        #expect(results.outcomes.filter { $0.status == "delivered" }.count == count - 1)
        let refused = results.outcomes.first { $0.token == dead }
        #expect(refused?.status == "rejected")
        #expect(refused?.reason == "BadDeviceToken")
        #expect(results.invalidTokens.map { $0["device_token"] } == [dead])
        #expect(results.outcomes.allSatisfy { $0.providerProtocol == "binary" }, "each outcome names its protocol")
        #expect(results.invalidTokenProtocols == ["binary"])
        #expect(try await world.committed() == perPartition)
        #expect(gateway.statistics.processedCount == count - 1, "nothing the gateway processed is sent twice")
        #expect(world.simulator.engine.statistics.requestsReceived == 0, "nothing went to the HTTP/2 simulator")
    }
}
