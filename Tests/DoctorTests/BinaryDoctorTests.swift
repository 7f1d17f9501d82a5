import APNSSimulator
import BinaryProvider
import DoctorChecks
import TestSupport
import Testing

/// `pushbridge doctor` for an app with `protocol: binary`: TCP to its gateway, then a probe notification over TLS
/// with the client certificate (docs/binary-protocol.md).
@Suite struct BinaryDoctorTests {
    /// Doctor's checks of an app `legacy` whose gateway and feedback service are the simulator's. With
    /// `trustsGateway: false` both present a certificate the app's `ca_file` does not trust; `feedbackPort` points
    /// the app's feedback endpoint elsewhere; `tarpit` points the gateway at one that accepts TCP and never
    /// answers TLS.
    func checks(
        unregisteredProbe: Bool, trustsGateway: Bool = true,
        feedbackTokens: [FeedbackTuple] = [], feedbackPort: Int? = nil, tarpit: Bool = false
    ) async throws -> (checks: [DoctorCheck], feedback: BinaryFeedbackService.Statistics) {
        return try await withDoctorSetup { setup in
            var behaviour = BinaryGatewayBehaviour()
            if unregisteredProbe { behaviour.unregisteredTokens = [Doctor.probeDeviceToken] }
            behaviour.feedbackTokens = feedbackTokens
            let other = try TestTLS.generate(name: "Other")
            let (gateway, feedback) = try await setup.tls.startBinarySimulator(
                behaviour, server: trustsGateway ? nil : other)
            let hostile = tarpit ? try await HostileBinaryGateway.start(tls: setup.tls, behaviour: .tarpit) : nil
            let apps = """
                apps:
                  legacy:
                    protocol: binary
                    environment: sandbox
                    ca_file: \(setup.tls.caCertificatePath)
                    auth: { type: certificate, cert_file: \(setup.tls.clientCertificatePath), key_file: \(setup.tls.clientKeyPath) }
                    endpoint: "127.0.0.1:\(hostile?.port ?? gateway.port)"
                    binary:
                      quiet_window: 2s
                      feedback: { endpoint: "127.0.0.1:\(feedbackPort ?? feedback.port)", topic: com.example.app }
                """
            let checks = try await setup.doctor(try setup.configuration(apps: apps))
            let statistics = feedback.statistics
            await feedback.close()
            await gateway.close()
            await hostile?.shutdown()
            other.remove()
            return (checks, statistics)
        }
    }

    /// Apple's feedback service hands its entries to any client that completes the TLS handshake and forgets them:
    /// doctor only connects over TCP, so it takes none of them.
    @Test func aReachableFeedbackServicePassesWithoutGivingUpItsEntries() async throws {
        let (checks, feedback) = try await self.checks(
            unregisteredProbe: false,
            feedbackTokens: [FeedbackTuple(timeEpochSeconds: 1, token: [UInt8](repeating: 7, count: 32))])
        let check = try #require(checks.named("apps.legacy feedback service"))
        #expect(check.status == .ok, "\(check)")
        #expect(check.found.contains("connects over TCP"))
        #expect(feedback.tuplesSent == 0, "doctor took no feedback entry")
    }

    @Test func anUnreachableFeedbackServiceFails() async throws {
        let (checks, _) = try await self.checks(unregisteredProbe: false, feedbackPort: 1)  // nothing listens on port 1
        let check = try #require(checks.named("apps.legacy feedback service"))
        #expect(check.status == .fail, "\(check)")
        #expect(check.hint?.contains("binary.feedback.enabled: false") == true)
        #expect(checks.named("apps.legacy binary gateway")?.status == .ok)
    }

    @Test func aGatewayThatTakesTheProbePasses() async throws {
        let (checks, _) = try await self.checks(unregisteredProbe: false)
        #expect(checks.named("apps.legacy tcp")?.status == .ok)
        let gateway = try #require(checks.named("apps.legacy binary gateway"))
        #expect(gateway.status == .ok, "\(gateway)")
        #expect(gateway.found.contains("no error packet"))
        #expect(checks.named("apps.legacy tls") == nil, "no HTTP/2 checks for a binary app")
    }

    @Test func aGatewayThatRefusesTheMadeUpTokenPassesToo() async throws {
        let (checks, _) = try await self.checks(unregisteredProbe: true)
        let gateway = try #require(checks.named("apps.legacy binary gateway"))
        #expect(gateway.status == .ok, "\(gateway)")
        #expect(gateway.found.contains("status 8"))
    }

    /// Before issue 29 the probe waited forever for a handshake that never came (the time limit ends such a hang;
    /// the setup and the other checks take tens of seconds in the loaded parallel suite, so no tighter bound).
    @Test(.timeLimit(.minutes(2)))
    func aGatewayThatNeverAnswersTLSFailsWithinTheTimeout() async throws {
        let (checks, _) = try await self.checks(unregisteredProbe: false, tarpit: true)
        #expect(checks.named("apps.legacy tcp")?.status == .ok)
        let gateway = try #require(checks.named("apps.legacy binary gateway"))
        #expect(gateway.status == .fail, "\(gateway)")
        #expect(gateway.found.contains("no TLS handshake within"), "\(gateway)")
    }

    @Test func anUntrustedGatewayCertificateFails() async throws {
        let (checks, _) = try await self.checks(unregisteredProbe: false, trustsGateway: false)
        let gateway = try #require(checks.named("apps.legacy binary gateway"))
        #expect(gateway.status == .fail, "\(gateway)")
        #expect(gateway.hint?.contains("ca_file") == true)
    }
}
