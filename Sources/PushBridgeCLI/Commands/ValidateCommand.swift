import ArgumentParser
import Configuration
import EgressProxy
import Routing

/// `pushbridge validate`: loads the configuration, its credential files and every route and template, and
/// prints every problem with its location (exit 2) or a short summary (exit 0).
struct ValidateCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "validate",
        abstract: "Load the configuration and every route and template; list every problem.",
        discussion: """
            Problems are printed to standard error, one per line, as FILE:LINE: KEY.PATH: MESSAGE (HINT), and \
            the exit status is 2. A valid configuration prints a summary and exits 0.
            """
    )

    @OptionGroup var configurationFile: ConfigurationOption

    func run() async throws {
        let loaded = try self.configurationFile.load()
        print(Self.summary(of: loaded.configuration, file: self.configurationFile.path), terminator: "")
    }

    /// What a valid configuration sets up, in a few lines.
    static func summary(of configuration: BridgeConfiguration, file: String) -> String {
        var lines: [String] = []
        let routes = configuration.routes
        let topics = configuration.inputTopics
        lines.append(
            "\(file): valid: \(routes.count) route\(routes.count == 1 ? "" : "s") "
                + "over \(topics.count) input topic\(topics.count == 1 ? "" : "s")"
        )
        lines.append("  kafka: \(configuration.kafka.bootstrapServers) (group \(configuration.kafka.groupID))")
        lines.append("  apns: \(self.describe(configuration.apns))")
        for name in configuration.apps.keys.sorted() {
            lines.append("  app \(name): \(self.describe(configuration.apps[name]!))")
        }
        for topic in topics {
            let names = routes.filter { $0.inputTopic == topic }.map(\.name)
            lines.append("  topic \(topic): \(names.joined(separator: ", "))")
        }
        lines += Self.lanes(of: configuration)
        let outcomes = configuration.outcomes
        lines.append(
            "  writes: \(outcomes.outcomes), \(outcomes.invalidTokens), \(outcomes.deadLetters)"
        )
        lines.append("  admin: \(configuration.admin.host):\(configuration.admin.port)")
        return lines.map { $0 + "\n" }.joined()
    }

    /// One line per lane with its bounds and routes, and one per input topic whose routes are in several lanes;
    /// nothing without `lanes:`.
    static func lanes(of configuration: BridgeConfiguration) -> [String] {
        guard !configuration.lanes.isEmpty else { return [] }
        let routes = configuration.routes
        var lines = LaneSpec.all(
            configuration.lanes, maxInFlight: configuration.kafka.maxInFlightNotifications,
            maxInFlightBytes: configuration.kafka.maxInFlightBytes
        ).map { lane in
            let names = routes.filter { ($0.lane ?? LaneSpec.defaultName) == lane.name }.map(\.name)
            return "  lane \(lane.name): max_in_flight \(lane.maxInFlight), "
                + LaneSpec.describe(bytes: lane.maxInFlightBytes)
                + (lane.expedite ? ", expedited" : "")
                + ": \(names.isEmpty ? "no route" : names.joined(separator: ", "))"
        }
        for topic in configuration.inputTopics {
            let lanes = Set(routes.filter { $0.inputTopic == topic }.map { $0.lane ?? LaneSpec.defaultName })
            guard lanes.count > 1 else { continue }
            lines.append(
                "  note: topic \(topic) has routes in lanes \(lanes.sorted().joined(separator: ", ")): each of its "
                    + "events waits until every lane it needs has room")
        }
        return lines
    }

    /// Environment, endpoint, auth kind and proxy (never a secret: a proxy's credentials show as `****`).
    static func describe(_ settings: APNSSettings) -> String {
        let auth =
            switch settings.auth {
            case .token(_, let keyID, let teamID): "token auth (key \(keyID), team \(teamID))"
            case .pkcs12: "certificate auth (p12)"
            case .pem: "certificate auth (PEM)"
            }
        let endpoint = settings.effectiveEndpoint
        var text = "\(settings.environment.rawValue) at \(endpoint), \(auth)"
        if let proxy = settings.proxy.proxy(forHost: endpoint.host) {
            text += ", through the proxy \(proxy)"
            if case .environment(_, let variable, _) = settings.proxy { text += " (from \(variable))" }
        }
        return text
    }
}
