import APNSClient
import APNSCore
import Configuration
import EgressProxy
import Foundation
import HTTP2
import NIOCore
import NIOPosix
import Routing

// One HTTP/2 APNs provider: TCP, TLS with ALPN h2 and the server's SETTINGS, and the probe request that asks
// APNs whether it accepts the credentials.
extension Doctor {
    /// Everything about one APNs provider (`scope` names it in the output; `app` selects its routes).
    package func checkAPNS(_ settings: APNSSettings, scope: String, app: String?) async -> [DoctorCheck] {
        var checks: [DoctorCheck] = []
        let routes = self.configuration.routes.filter { $0.app == app }
        let (credentials, credentialChecks) = self.checkCredentials(settings, scope: scope, routes: routes)
        checks += credentialChecks

        if settings.providerProtocol == .binary {
            checks += await self.checkBinary(settings, credentials: credentials, scope: scope)
            if settings.binary.feedback.enabled {
                checks.append(await self.checkFeedback(settings, scope: scope))
            }
            return checks
        }
        let endpoint = settings.effectiveEndpoint
        let proxy = settings.proxy.proxy(forHost: endpoint.host)
        let tcp = await self.checkTCP(endpoint, settings: settings, scope: scope)
        checks.append(tcp)
        guard tcp.status == .ok else {
            checks.append(DoctorCheck(.warn, "\(scope) tls", "not checked: no TCP connection", hint: "fix TCP first"))
            return checks
        }
        var tls = HTTP2ClientTLS(additionalTrustRootsPEMFile: settings.caFile)
        if case .certificate(let certificate) = credentials {
            tls.clientCertificateChain = certificate.certificateChain
            tls.clientPrivateKey = certificate.privateKey
        }
        let connection: HTTP2ClientConnection
        do {
            connection = try await HTTP2ClientConnection.connect(
                configuration: HTTP2ClientConfiguration(
                    // No local cap, so the connection's limit is the server's SETTINGS_MAX_CONCURRENT_STREAMS.
                    host: endpoint.host, port: endpoint.port, proxy: proxy, tls: tls,
                    maxConcurrentStreams: Int(Int32.max),
                    requestTimeout: self.options.apnsTimeout, connectTimeout: self.options.apnsTimeout
                ),
                eventLoopGroup: self.eventLoopGroup
            )
        } catch {
            checks.append(self.tlsFailure(error, endpoint: endpoint, settings: settings, scope: scope))
            return checks
        }
        let streams = connection.state.maxConcurrentStreams
        checks.append(
            DoctorCheck(
                .ok, "\(scope) tls",
                "\(endpoint): TLS verified, ALPN h2, server SETTINGS_MAX_CONCURRENT_STREAMS "
                    + (streams >= Int(Int32.max) ? "unlimited (none sent)" : "\(streams)")
            )
        )
        checks += await self.probe(connection, credentials: credentials, scope: scope, routes: routes)
        await connection.close()
        return checks
    }

    /// A TCP connection to `endpoint`, through the `CONNECT` tunnel of the app's proxy when it has one (the check
    /// then names the proxy and what it answered).
    func checkTCP(_ endpoint: APNSSettings.Endpoint, settings: APNSSettings, scope: String) async -> DoctorCheck {
        let proxy = settings.proxy.proxy(forHost: endpoint.host)
        do {
            let channel = try await EgressConnect.connect(
                host: endpoint.host, port: endpoint.port, proxy: proxy,
                eventLoop: self.eventLoopGroup.next(), timeout: self.options.apnsTimeout
            ) { _ in }.get()
            let peer = channel.remoteAddress.map { "\($0)" } ?? "\(endpoint.host):\(endpoint.port)"
            try? await channel.close()
            guard let proxy else {
                return DoctorCheck(.ok, "\(scope) tcp", "\(endpoint.host):\(endpoint.port) connects (\(peer))")
            }
            return DoctorCheck(
                .ok, "\(scope) tcp",
                "\(endpoint.host):\(endpoint.port) connects through the proxy \(proxy)\(Self.origin(settings.proxy)) "
                    + "(CONNECT answered 2xx)")
        } catch let error as EgressProxyError {
            return DoctorCheck(
                .fail, "\(scope) tcp",
                "cannot connect to \(endpoint.host):\(endpoint.port) \(error)\(Self.origin(settings.proxy))",
                hint: Self.proxyHint(error, port: endpoint.port))
        } catch {
            return DoctorCheck(
                .fail, "\(scope) tcp", "cannot connect to \(endpoint.host):\(endpoint.port): \(error)",
                hint: "allow outbound TCP to \(endpoint.host) port \(endpoint.port) (APNs: 443 or 2197) "
                    + "in firewalls and proxies, and check DNS"
            )
        }
    }

    private func tlsFailure(
        _ error: any Error,
        endpoint: APNSSettings.Endpoint,
        settings: APNSSettings,
        scope: String
    ) -> DoctorCheck {
        let detail =
            (error as? HTTP2Error).map { error in
                [error.message, error.cause.map { "\($0)" }].compactMap { $0 }.joined(separator: ": ")
            } ?? "\(error)"
        let hint: String
        if detail.contains("ALPN") {
            hint = "the endpoint must speak HTTP/2: point apns.endpoint at APNs (or the simulator), not a proxy"
        } else if settings.caFile == nil {
            hint =
                "install Apple's roots (AAA Certificate Services, USERTrust RSA) in the system store "
                + "(ca-certificates), or set ca_file to the CA of a simulator or proxy"
        } else {
            hint = "ca_file must be the PEM CA that signed the server's certificate for \(endpoint.host)"
        }
        return DoctorCheck(.fail, "\(scope) tls", "\(endpoint): TLS or HTTP/2 setup failed: \(detail)", hint: hint)
    }

    // MARK: The probe request

    private func probe(
        _ connection: HTTP2ClientConnection,
        credentials: Credentials,
        scope: String,
        routes: [RouteSpec]
    ) async -> [DoctorCheck] {
        let name = "\(scope) auth"
        // The request the bridge would send, written by APNSCore's one description of the wire. Without a route
        // there is no topic to name, and the request goes without `apns-topic`, as it always did.
        let notification = Self.probeNotification(topic: routes.first.map { Self.bundleID(of: $0) } ?? "")
        var headers = notification.apnsHeaders
            .filter { !($0.name == "apns-topic" && $0.value.isEmpty) }
            .map { HTTP2Header($0.name, $0.value) }
        let what: String
        switch credentials {
        case .token(let key):
            let issuedAt = Int64(self.clock.now().timeIntervalSince1970.rounded(.down))
            do {
                let jwt = try ProviderTokenJWT.sign(
                    keyID: key.keyID, teamID: key.teamID, issuedAtEpochSeconds: issuedAt, privateKey: key.privateKey)
                headers.append(HTTP2Header("authorization", "bearer \(jwt.compact)", indexing: .never))
            } catch {
                return [DoctorCheck(.fail, name, "cannot sign a provider token: \(error)", hint: "replace the .p8 key")]
            }
            what = "provider token"
        case .certificate:
            what = "client certificate"
        case .unusable:
            return [
                DoctorCheck(.warn, name, "not checked: the credentials do not load", hint: "fix the credentials first"),
                DoctorCheck(
                    .warn, "\(scope) clock", "not checked: no probe request", hint: "fix the credentials first"),
            ]
        }
        let response: HTTP2Response
        do {
            response = try await connection.send(
                HTTP2Request(method: "POST", path: notification.path, headers: headers, body: notification.payload)
            )
        } catch {
            return [
                DoctorCheck(
                    .fail, name, "no answer to the probe request: \(error)",
                    hint: "APNs should answer at once; check proxies between this host and APNs"
                ),
                DoctorCheck(.warn, "\(scope) clock", "not checked: no answer", hint: "fix the connection first"),
            ]
        }
        let answer = APNSResponse(
            status: response.status,
            headers: response.headers.map { (name: $0.name, value: $0.value) },
            body: response.body
        )
        return [
            self.judge(answer, what: what, name: name),
            self.checkClock(response.headers.first("date"), scope: scope, answer: answer),
        ]
    }

    /// What the probe's answer says about the credentials.
    func judge(_ answer: APNSResponse, what: String, name: String) -> DoctorCheck {
        let said = "HTTP \(answer.status)\(answer.reason.map { " \($0.rawValue)" } ?? "")"
        switch (answer.status, answer.reason) {
        case (200, _), (410, _), (400, .badDeviceToken?):
            return DoctorCheck(.ok, name, "APNs accepts the \(what) (the all-zero probe token got \(said))")
        case (400, .topicDisallowed?), (400, .badTopic?), (400, .deviceTokenNotForTopic?):
            return DoctorCheck(
                .fail, name, "the \(what) is accepted, but not for the routes' topic: \(said)",
                hint: "the routes' topic must be a bundle ID of the key's team (or the certificate's app)"
            )
        case (400, _):
            return DoctorCheck(
                .warn, name, "the \(what) passed, but the probe got \(said)", hint: "see docs/operations.md#doctor")
        case (403, let reason):
            return DoctorCheck(.fail, name, "APNs refuses the \(what): \(said)", hint: Self.hint(for: reason))
        default:
            return DoctorCheck(
                .warn, name, "APNs answered \(said); the \(what) could not be judged",
                hint: "run doctor again later (APNs busy or shutting down)"
            )
        }
    }

    private static func hint(for reason: Reason?) -> String {
        switch reason {
        case .invalidProviderToken?:
            "key_file, key_id and team_id must belong together: the key ID of the .p8, the team that owns it"
        case .expiredProviderToken?: "the token was fresh, so this host's clock is off by over an hour: run NTP"
        case .badEnvironmentKeyIdInToken?, .badEnvironmentKeyInToken?:
            "the key is restricted to the other environment: fix environment or use a key for this one"
        case .missingProviderToken?: "configure auth (type token) or a client certificate"
        case .badCertificate?: "the certificate is not an APNs certificate, or revoked: create a new one"
        case .badCertificateEnvironment?: "the certificate is for the other environment: fix environment"
        default: "see Apple's reason table in docs/operations.md"
        }
    }
}

// The egress proxy: where it comes from, and what to do when it refuses.
extension Doctor {
    /// ` (apns.proxy)`-like words saying where the proxy comes from: empty for the configuration's (its key is the
    /// check's scope), ` (from HTTPS_PROXY)` for the environment's.
    static func origin(_ policy: EgressProxyPolicy) -> String {
        if case .environment(_, let variable, _) = policy { return " (from \(variable))" }
        return ""
    }

    /// What to do about a proxy that failed the tunnel.
    static func proxyHint(_ error: EgressProxyError, port: Int) -> String {
        switch (error.code, error.status) {
        case (.refused, 401?), (.refused, 407?):
            "check the proxy's user and password (the proxy URL in proxy, proxy_file or HTTPS_PROXY; write @ as %40 "
                + "and : as %3A inside them)"
        case (.refused, 403?), (.refused, 405?):
            "the proxy must allow CONNECT to port \(port) (squid: http_access and SSL_ports; tinyproxy: ConnectPort)"
        case (.refused, 502?), (.refused, 503?), (.refused, 504?):
            "the proxy cannot reach APNs: check the proxy's own egress and DNS"
        case (.proxyUnreachable, _):
            "check the proxy's host and port, and that this host may reach it; or set proxy: none to connect directly"
        default:
            "the proxy must be an HTTP proxy that accepts CONNECT (not a SOCKS proxy, nor an https:// one)"
        }
    }
}
