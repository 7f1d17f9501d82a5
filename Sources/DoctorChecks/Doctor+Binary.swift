import APNSClient
import APNSCore
import BinaryProvider
import Configuration
import EgressProxy
import Foundation

// A provider on the legacy binary protocol: its gateway and its feedback service.
extension Doctor {
    /// The feedback service of a binary app: TCP only. The service writes its entries to any client that completes
    /// the TLS handshake and then forgets them, so a TLS check here would take tokens the bridge's poller never
    /// publishes; doctor must be safe to run against production. The certificate is proven by the gateway check.
    func checkFeedback(_ settings: APNSSettings, scope: String) async -> DoctorCheck {
        let name = "\(scope) feedback service"
        let endpoint = settings.binary.feedback.endpoint ?? FeedbackSettings.appleFeedback(settings.environment)
        let tcp = await self.checkTCP(endpoint, settings: settings, scope: scope)
        guard tcp.status == .ok else {
            return DoctorCheck(
                .fail, name, tcp.found,
                hint: (tcp.hint ?? "") + "; or set binary.feedback.endpoint, or binary.feedback.enabled: false")
        }
        return DoctorCheck(
            .ok, name,
            "\(endpoint.host):\(endpoint.port) connects over TCP (TLS not tried: the service hands its entries to any "
                + "client that completes the handshake, and only the bridge's poller publishes them)")
    }

    /// A provider on the legacy binary protocol: TCP to its gateway, then one probe notification to a made-up
    /// token over TLS with the client certificate. The protocol never confirms success: no error packet within
    /// the quiet window, or status 8 (invalid token) for the made-up token, both prove the connection and the
    /// certificate work.
    func checkBinary(_ settings: APNSSettings, credentials: Credentials, scope: String) async -> [DoctorCheck] {
        let gateway = settings.binary.gateway ?? BinaryProtocolSettings.appleGateway(settings.environment)
        let tcp = await self.checkTCP(gateway, settings: settings, scope: scope)
        guard tcp.status == .ok else {
            return [
                tcp,
                DoctorCheck(.warn, "\(scope) binary gateway", "not checked: no TCP connection", hint: "fix TCP first"),
            ]
        }
        guard case .certificate(let certificate) = credentials else {
            return [
                tcp,
                DoctorCheck(
                    .warn, "\(scope) binary gateway", "not checked: the certificate does not load",
                    hint: "fix the credentials first"),
            ]
        }
        var configuration = BinaryClientConfiguration(host: gateway.host, port: gateway.port, credentials: certificate)
        configuration.format = settings.binary.format
        configuration.quietWindow = settings.binary.quietWindow
        configuration.maxResendsWithoutError = 0
        configuration.connectTimeout = self.options.apnsTimeout
        let name = "\(scope) binary gateway"
        configuration.additionalTrustRootsPEMFile = settings.caFile
        configuration.proxy = settings.proxy.proxy(forHost: gateway.host)
        let client: BinaryClient
        do {
            client = try BinaryClient(configuration: configuration, eventLoopGroup: self.eventLoopGroup)
        } catch {
            return [
                tcp, DoctorCheck(.fail, name, "cannot set up TLS for the gateway: \(error)", hint: "check ca_file"),
            ]
        }
        let probe = Self.probeNotification(topic: "probe")
        let result = await client.send(probe)
        await client.close()
        let endpoint = "\(gateway.host):\(gateway.port)"
        switch result {
        case .answered(let answer) where answer.status == 200:
            return [
                tcp,
                DoctorCheck(
                    .ok, name,
                    "\(endpoint): TLS with the client certificate; a probe notification got no error packet within "
                        + "\(settings.binary.quietWindow)"),
            ]
        case .answered(let answer) where answer.reason == .badDeviceToken:
            return [
                tcp,
                DoctorCheck(
                    .ok, name,
                    "\(endpoint): TLS with the client certificate; the probe's made-up token was answered status 8 "
                        + "(invalid token), as a working gateway does"),
            ]
        case .answered(let answer):
            return [
                tcp,
                DoctorCheck(
                    .fail, name,
                    "\(endpoint): the gateway refused the probe: \(answer.reason?.rawValue ?? "\(answer.status)")",
                    hint: "a topic refusal means the certificate is not a push certificate for the app"),
            ]
        case .failed(let failure):
            let detail = if case .unreachable(let why) = failure { why } else { failure.reason }
            return [
                tcp,
                DoctorCheck(
                    .fail, name, "\(endpoint): \(detail)",
                    hint: "the gateway must accept this client certificate over TLS (and ca_file must be its CA)"),
            ]
        }
    }
}
