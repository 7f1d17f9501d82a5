import APNSCore
import APNSSimulator
import Crypto
import Foundation
import Logging
import NIOSSL

extension TestTLS {
    /// Starts the APNs simulator for `scenario` on this material's server certificate, with its logs silenced,
    /// trusting a new P-256 provider key as `keyID` of `teamID`; the key is written as PEM to `keyFile` in
    /// ``directory``, where a configuration's `auth.key_file` can name it.
    package func startSimulator(
        scenario: SimulatorScenario,
        keyID: String,
        teamID: String,
        keyFile: String = "AuthKey.p8",
        clock: any WallClock = SystemWallClock()
    ) async throws -> APNSSimulatorServer {
        let signingKey = P256.Signing.PrivateKey()
        var scenario = scenario
        scenario.jwtKeys = [.init(keyID: keyID, teamID: teamID, publicKey: signingKey.publicKey)]
        var logger = Logger(label: "simulator")
        logger.logLevel = .critical
        let simulator = try await APNSSimulatorServer.start(
            scenario: scenario,
            certificatePEMPath: self.serverCertificatePath,
            privateKeyPEMPath: self.serverKeyPath,
            clock: clock,
            logger: logger
        )
        try Data(signingKey.pemRepresentation.utf8).write(to: self.directory.appendingPathComponent(keyFile))
        return simulator
    }
}

extension TestTLS {
    /// Starts the simulator's binary gateway with `behaviour` and its feedback service on this material's server
    /// certificate (or `server`'s), accepting client certificates signed by this material's CA (or
    /// `clientCA`'s).
    package func startBinarySimulator(
        _ behaviour: BinaryGatewayBehaviour = BinaryGatewayBehaviour(), server: TestTLS? = nil,
        clientCA: TestTLS? = nil
    ) async throws -> (gateway: BinaryGateway, feedback: BinaryFeedbackService) {
        let server = server ?? self
        let gateway = try await BinaryGateway.start(
            behaviour: behaviour, certificateChain: try server.serverCertificateChain(),
            privateKey: try server.serverPrivateKey(), clientCertificateTrustRoots: [try self.caCertificate()])
        let feedback = try await BinaryFeedbackService.start(
            gateway: gateway, certificateChain: try server.serverCertificateChain(),
            privateKey: try server.serverPrivateKey(),
            clientCertificateTrustRoots: [try (clientCA ?? self).caCertificate()])
        return (gateway, feedback)
    }
}

extension TestTLS {
    /// The fingerprint under which the simulator counts the requests of connections that presented the certificate
    /// in the PEM file at `path` (`SimulatorStatistics.byClientCertificate`).
    package static func simulatorFingerprint(ofCertificateAt path: String) throws -> String {
        guard let fingerprint = SimulatorRequest.fingerprint(of: try NIOSSLCertificate.fromPEMFile(path)[0]) else {
            throw NIOSSLError.failedToLoadCertificate
        }
        return fingerprint
    }
}
