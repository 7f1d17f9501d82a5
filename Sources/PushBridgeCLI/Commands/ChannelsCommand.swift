import APNSClient
import APNSCore
import ArgumentParser
import Bridge
import Configuration
import EgressProxy
import Foundation
import Logging
import Routing

/// `pushbridge channels`: manage an app's broadcast channels (iOS 18 Live Activities) with the configured
/// credentials, against Apple's channel management API (docs/apns-client.md, "Broadcast channels").
///
/// Exit status: 0 success; 1 when APNs refused the request or could not be reached (the output says why); 2 on
/// usage errors and unusable configuration.
struct ChannelsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "channels",
        abstract: "Create, list, read or delete an app's APNs broadcast channels (iOS 18 Live Activities).",
        discussion: """
            Uses the credentials and environment of the configuration's apns block, or of apps.NAME with --app. \
            Requests go to Apple's channel management host of the environment \
            (api-manage-broadcast[.sandbox].push.apple.com), or to the app's broadcast.management_endpoint. \
            The bundle ID is --topic, else the one topic of the routes that use the app. \
            Exit status: 0 success, 1 when APNs refused the request or could not be reached, 2 on usage errors.
            """,
        subcommands: [Create.self, List.self, Read.self, Delete.self]
    )

    /// The options every subcommand takes.
    struct Options: ParsableArguments {
        @OptionGroup var configurationFile: ConfigurationOption

        @Option(help: "The app: a name under apps (default: the apns block).")
        var app: String?

        @Option(help: "The app's bundle ID (default: the one topic of the routes that use the app).")
        var topic: String?

        @Option(
            help: "Seconds to wait for a connection, and then for the answer (1 to \(Self.maximumTimeoutSeconds)).")
        var timeout: Int = 30

        /// The longest `--timeout`.
        static let maximumTimeoutSeconds = 600

        func validate() throws {
            guard (1...Self.maximumTimeoutSeconds).contains(self.timeout) else {
                throw ValidationError(
                    "--timeout must be between 1 and \(Self.maximumTimeoutSeconds) seconds, got \(self.timeout)")
            }
        }
    }

    struct Create: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Create a channel and print its ID.",
            discussion: """
                --storage-policy 0 (No Message Stored, the default: a higher publishing budget) or 1 (Most Recent \
                Message Stored, kept up to 8 hours for devices that come online later). It cannot be changed later.
                """)

        @OptionGroup var options: Options

        @Option(help: "0 (No Message Stored) or 1 (Most Recent Message Stored).")
        var storagePolicy: Int = 0

        func validate() throws {
            guard MessageStoragePolicy(rawValue: self.storagePolicy) != nil else {
                throw ValidationError("--storage-policy must be 0 or 1, got \(self.storagePolicy)")
            }
        }

        func run() async throws {
            let policy = MessageStoragePolicy(rawValue: self.storagePolicy)!
            try await ChannelsCommand.perform(self.options) { client, bundleID throws(ChannelManagementError) in
                let answer = try await client.create(bundleID: bundleID, storagePolicy: policy)
                FileHandleOutput.standardOutput("\(answer.value)\n")
            }
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Print the IDs of the app's channels, one a line.")

        @OptionGroup var options: Options

        func run() async throws {
            try await ChannelsCommand.perform(self.options) { client, bundleID throws(ChannelManagementError) in
                let answer = try await client.list(bundleID: bundleID)
                FileHandleOutput.standardOutput(answer.value.map { "\($0)\n" }.joined())
                FileHandleOutput.standardError(
                    "\(answer.value.count) channel\(answer.value.count == 1 ? "" : "s") of \(bundleID)\n")
            }
        }
    }

    struct Read: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Print a channel's storage policy and push type.")

        @OptionGroup var options: Options

        @Option(help: "The channel ID (as create printed it).")
        var channelId: String

        func run() async throws {
            try await ChannelsCommand.perform(self.options) { client, bundleID throws(ChannelManagementError) in
                let answer = try await client.read(bundleID: bundleID, channelID: self.channelId)
                let policy = answer.value.storagePolicy
                FileHandleOutput.standardOutput(
                    "channel-id: \(self.channelId)\n"
                        + "message-storage-policy: \(policy.rawValue) (\(ChannelsCommand.describe(policy)))\n"
                        + "push-type: \(answer.value.pushType)\n")
            }
        }
    }

    struct Delete: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Delete a channel. Messages already sent on it may still be delivered.")

        @OptionGroup var options: Options

        @Option(help: "The channel ID (as create printed it).")
        var channelId: String

        func run() async throws {
            try await ChannelsCommand.perform(self.options) { client, bundleID throws(ChannelManagementError) in
                _ = try await client.delete(bundleID: bundleID, channelID: self.channelId)
                FileHandleOutput.standardOutput("deleted \(self.channelId)\n")
            }
        }
    }

    static func describe(_ policy: MessageStoragePolicy) -> String {
        switch policy {
        case .noMessageStored: "No Message Stored"
        case .mostRecentMessageStored: "Most Recent Message Stored"
        }
    }

    /// Loads the configuration, makes a client for the app's management endpoint, runs `body`, and turns what
    /// goes wrong into the exit status: 2 for the configuration and usage, 1 for APNs' refusals and failures.
    static func perform(
        _ options: Options,
        _ body: (ChannelManagementClient, String) async throws(ChannelManagementError) -> Void
    ) async throws {
        let loaded = try options.configurationFile.load()
        let settings = try Self.settings(loaded.configuration, app: options.app)
        let bundleID = try Self.bundleID(loaded.configuration, app: options.app, topic: options.topic)
        var clientConfiguration: APNSClientConfiguration
        do {
            clientConfiguration = try APNSSender.clientConfiguration(settings)
        } catch {
            FileHandleOutput.standardError("error: \(error)\n")
            throw ExitCode(2)
        }
        let endpoint = settings.effectiveManagementEndpoint
        clientConfiguration.endpoint = APNSClientConfiguration.Endpoint(host: endpoint.host, port: endpoint.port)
        clientConfiguration.proxy = settings.proxy.proxy(forHost: endpoint.host)
        clientConfiguration.requestTimeout = .seconds(options.timeout)
        clientConfiguration.connectTimeout = .seconds(min(options.timeout, 10))
        // The pool's reconnect warnings would repeat the one error line the command prints.
        var logger = Logger(label: "pushbridge.apns.channels")
        logger.logLevel = .error
        let client = ChannelManagementClient(configuration: clientConfiguration, logger: logger)
        do {
            try await body(client, bundleID)
            await client.shutdown()
        } catch {
            await client.shutdown()
            FileHandleOutput.standardError("error: \(error)\n")
            throw ExitCode(error.code == .invalidRequest ? 2 : 1)
        }
    }

    /// The `apns` block or `apps.NAME`, when it speaks HTTP/2.
    static func settings(_ configuration: BridgeConfiguration, app: String?) throws -> APNSSettings {
        guard let settings = configuration.apnsSettings(forApp: app) else {
            let known = configuration.apps.keys.sorted()
            FileHandleOutput.standardError(
                "error: --app \(app ?? ""): no app of that name under apps; "
                    + (known.isEmpty
                        ? "the configuration defines none (leave --app out for the apns block)\n"
                        : "defined: \(known.joined(separator: ", "))\n"))
            throw ExitCode(2)
        }
        guard settings.providerProtocol == .http2 else {
            FileHandleOutput.standardError(
                "error: \(app.map { "apps.\($0)" } ?? "apns") speaks the binary protocol, which has no broadcast "
                    + "channels; use an app with protocol: http2\n")
            throw ExitCode(2)
        }
        return settings
    }

    /// `topic`, else the one bundle ID the routes of `app` send to (their topics without a push-type suffix).
    static func bundleID(_ configuration: BridgeConfiguration, app: String?, topic: String?) throws -> String {
        if let topic { return topic }
        let bundles = Set(
            configuration.routes.filter { $0.app == app }.map { route in
                PushType.allCases.reduce(route.topic) { topic, pushType in
                    let suffix = pushType.topicSuffix
                    return !suffix.isEmpty && topic.hasSuffix(suffix) ? String(topic.dropLast(suffix.count)) : topic
                }
            })
        guard bundles.count == 1, let bundle = bundles.first else {
            let which = app.map { "app \($0)" } ?? "the apns block"
            FileHandleOutput.standardError(
                "error: cannot tell the bundle ID: the routes of \(which) name "
                    + (bundles.isEmpty ? "no topic" : "several (\(bundles.sorted().joined(separator: ", ")))")
                    + "; give it with --topic BUNDLE_ID\n")
            throw ExitCode(2)
        }
        return bundle
    }
}
