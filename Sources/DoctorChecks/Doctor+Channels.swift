import APNSClient
import APNSCore
import Configuration
import EgressProxy
import Logging
import Routing

// The fixed broadcast channels the routes name.
extension Doctor {
    /// The routes of `app` whose `channel_id` is a fixed channel (no `{{` tag), in configuration order.
    func staticChannelRoutes(app: String?) -> [(index: Int, route: RouteSpec, channelID: String)] {
        self.configuration.routes.enumerated().compactMap { index, route in
            guard route.app == app, let channelID = route.channelID, !channelID.contains("{{") else { return nil }
            return (index, route, channelID)
        }
    }

    /// One line per route of `app` that names a fixed broadcast channel: the channel exists for the route's
    /// bundle ID, read through Apple's channel management API at the app's management endpoint
    /// (`broadcast.management_endpoint`, else Apple's host of the environment) with the app's credentials. A
    /// channel that does not exist (deleted, never created, or created in the other environment) fails, naming
    /// the route and the channel: every broadcast of that route would be rejected `ChannelNotRegistered`.
    /// Channels rendered from events cannot be known here and are not checked.
    package func checkChannels(_ settings: APNSSettings, scope: String, app: String?) async -> [DoctorCheck] {
        let routes = self.staticChannelRoutes(app: app)
        guard !routes.isEmpty, settings.providerProtocol == .http2 else { return [] }
        let endpoint = settings.effectiveManagementEndpoint
        let authentication: APNSAuthentication
        switch self.checkCredentials(settings, scope: scope, routes: []).0 {
        case .token(let key): authentication = .token(ProviderTokenSource(key: key, clock: self.clock))
        case .certificate(let credentials): authentication = .certificate(credentials)
        case .unusable:
            return routes.map { index, route, _ in
                DoctorCheck(
                    .warn, "\(scope) channel \(route.name)", "not checked: the credentials do not load",
                    hint: "fix the credentials first")
            }
        }
        var logger = Logger(label: "pushbridge.doctor.channels")
        logger.logLevel = .critical
        let client = ChannelManagementClient(
            configuration: APNSClientConfiguration(
                endpoint: APNSClientConfiguration.Endpoint(host: endpoint.host, port: endpoint.port),
                proxy: settings.proxy.proxy(forHost: endpoint.host), authentication: authentication, connectionCount: 1,
                requestTimeout: self.options.apnsTimeout,
                connectTimeout: self.options.apnsTimeout, additionalTrustRootsPEMFile: settings.caFile),
            eventLoopGroup: self.eventLoopGroup, logger: logger)
        var checks: [DoctorCheck] = []
        for (index, route, channelID) in routes {
            let name = "\(scope) channel \(route.name)"
            let bundleID = Self.bundleID(of: route)
            do {
                let read = try await client.read(bundleID: bundleID, channelID: channelID)
                checks.append(
                    DoctorCheck(
                        .ok, name,
                        "channel \(channelID) of \(bundleID) exists at \(endpoint) (storage policy "
                            + "\(read.value.storagePolicy.rawValue))"))
            } catch {
                checks.append(
                    self.channelFailure(
                        error, route: route, index: index, channelID: channelID,
                        bundleID: bundleID, endpoint: endpoint, name: name))
            }
        }
        await client.shutdown()
        return checks
    }

    private func channelFailure(
        _ error: ChannelManagementError, route: RouteSpec, index: Int, channelID: String, bundleID: String,
        endpoint: APNSSettings.Endpoint, name: String
    ) -> DoctorCheck {
        let app = route.app.map { " --app \($0)" } ?? ""
        switch error.reason {
        case .channelNotRegistered?:
            return DoctorCheck(
                .fail, name,
                "route \(route.name) sends to channel \(channelID), which does not exist for \(bundleID) at "
                    + "\(endpoint) (ChannelNotRegistered): every broadcast of the route would be rejected",
                hint: "create one with `pushbridge channels create\(app) --topic \(bundleID)` and write the printed ID "
                    + "into routes[\(index)].channel_id; channels belong to one environment, so check that "
                    + "apns.environment is the one the channel was created in")
        case .badChannelId?:
            return DoctorCheck(
                .fail, name, "route \(route.name): APNs calls \(channelID) malformed (BadChannelId)",
                hint: "write the base64 ID that `pushbridge channels create` printed into routes[\(index)].channel_id")
        case .featureNotEnabled?:
            return DoctorCheck(
                .fail, name, "route \(route.name): broadcast is not enabled for \(bundleID) (FeatureNotEnabled)",
                hint: "enable the Broadcast Capability for the app ID on developer.apple.com (Identifiers)")
        default:
            return DoctorCheck(
                .fail, name,
                "route \(route.name): could not read channel \(channelID) of \(bundleID) at \(endpoint): "
                    + "\(error)",
                hint: "check broadcast.management_endpoint (default Apple's management host of the environment), "
                    + "that this host reaches it, and that the credentials cover \(bundleID)")
        }
    }
}
