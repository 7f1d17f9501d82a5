import APNSSimulator
import DoctorChecks
import Testing
import TestSupport

/// `pushbridge doctor` for an app with `protocol: binary`: TCP to its gateway, then a probe notification over TLS
/// with the client certificate (docs/binary-protocol.md).
@Suite struct BinaryDoctorTests {
    func checks(unregisteredProbe: Bool, trustsGateway: Bool = true) async throws -> [DoctorCheck] {
        let setup = try await DoctorSetup()
        var behaviour = BinaryGatewayBehaviour()
        if unregisteredProbe { behaviour.unregisteredTokens = [Doctor.probeDeviceToken] }
        let other = try TestTLS.generate(name: "Other")
        let gatewayTLS = trustsGateway ? setup.tls : other
        let gateway = try await BinaryGateway.start(
            behaviour: behaviour, certificateChain: try gatewayTLS.serverCertificateChain(),
            privateKey: try gatewayTLS.serverPrivateKey(), clientCertificateTrustRoots: [try setup.tls.caCertificate()])
        let apps = """
            apps:
              legacy:
                protocol: binary
                environment: sandbox
                ca_file: \(setup.tls.caCertificatePath)
                auth: { type: certificate, cert_file: \(setup.tls.clientCertificatePath), key_file: \(setup.tls.clientKeyPath) }
                binary: { gateway: "127.0.0.1:\(gateway.port)", quiet_window: 2s }
            """
        let checks = try await setup.doctor(try setup.configuration(apps: apps))
        await gateway.close()
        await setup.close()
        other.remove()
        return checks
    }

    @Test func aGatewayThatTakesTheProbePasses() async throws {
        let checks = try await self.checks(unregisteredProbe: false)
        #expect(checks.named("apps.legacy tcp")?.status == .ok)
        let gateway = try #require(checks.named("apps.legacy binary gateway"))
        #expect(gateway.status == .ok, "\(gateway)")
        #expect(gateway.found.contains("no error packet"))
        #expect(checks.named("apps.legacy tls") == nil, "no HTTP/2 checks for a binary app")
    }

    @Test func aGatewayThatRefusesTheMadeUpTokenPassesToo() async throws {
        let checks = try await self.checks(unregisteredProbe: true)
        let gateway = try #require(checks.named("apps.legacy binary gateway"))
        #expect(gateway.status == .ok, "\(gateway)")
        #expect(gateway.found.contains("status 8"))
    }

    @Test func anUntrustedGatewayCertificateFails() async throws {
        let checks = try await self.checks(unregisteredProbe: false, trustsGateway: false)
        let gateway = try #require(checks.named("apps.legacy binary gateway"))
        #expect(gateway.status == .fail, "\(gateway)")
        #expect(gateway.hint?.contains("ca_file") == true)
    }
}
