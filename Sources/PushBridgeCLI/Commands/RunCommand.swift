import ArgumentParser
import Bridge
import Configuration
import Foundation
import Logging
import Prometheus

/// `pushbridge run`: the main job. Runs the bridge until SIGTERM/SIGINT, then drains and stops cleanly
/// (exit 0).
struct RunCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "run",
        abstract: "Run the bridge until SIGTERM/SIGINT, then drain and stop cleanly.",
        discussion: """
            Consumes the configured input topics in the consumer group, sends the notifications to APNs and \
            publishes outcomes, invalid tokens and dead letters. With --log-sender nothing is sent: each \
            notification is logged and reported delivered, to try routes without Apple credentials. SIGHUP, or a \
            change to the configuration file or a file it names, reloads the configuration without leaving the \
            consumer group; a change that applies only at a restart is refused (docs/configuration.md).
            """
    )

    @OptionGroup var configurationFile: ConfigurationOption

    @Flag(help: "Send nothing: log each notification and report it delivered.")
    var logSender = false

    func run() async throws {
        // SIGHUP asks for a reload, which the reloader handles once the bridge runs; before that its default action
        // would end the process. Ignored until then (what changes meanwhile, the file check still sees).
        signal(SIGHUP, SIG_IGN)
        let environment = ProcessInfo.processInfo.environment
        // Read before the configuration is loaded, so that whatever changes after it reloads (docs/configuration.md,
        // "Reloading").
        let reading = ConfigurationReading.read(file: self.configurationFile.path, environment: environment)
        let loaded = try self.configurationFile.load(checksCredentialFiles: !self.logSender)
        let logger = LoggingBootstrap.bootstrap(loaded.configuration.logging)
        let registry = PrometheusCollectorRegistry()
        let runtime = BridgeRuntime(loaded: loaded, registry: registry, logger: logger)
        let sender: any ManagedSender
        if self.logSender {
            sender = LogSender(logger: logger.with(label: "pushbridge.sender"))
        } else {
            do {
                sender = try APNSSenderFactory.make(for: loaded.configuration, logger: logger)
            } catch {
                FileHandleOutput.standardError("pushbridge run: \(error)\n")
                throw ExitCode(1)
            }
        }
        // A reload builds new senders the same way (none with --log-sender).
        var makeSender: (@Sendable (BridgeConfiguration) throws -> any ManagedSender)?
        if !self.logSender {
            makeSender = { @Sendable configuration in try APNSSenderFactory.make(for: configuration, logger: logger) }
        }
        let reload = ConfigurationReloader.Options(
            configurationFile: self.configurationFile.path, environment: environment, reading: reading,
            makeSender: makeSender, checksCredentialFiles: !self.logSender)
        do {
            // A shutdown that overran its bound (docs/operations.md, "Shutdown") ends the process: what is unfinished
            // stays uncommitted, and the partitions' next owner processes it again.
            try await runtime.run(sender: sender, reload: reload, onShutdownOverrun: { Foundation.exit(1) })
        } catch {
            logger.critical("PushBridge failed", error: error)
            throw ExitCode(1)
        }
    }
}

/// Sets up swift-log once per process, as `logging:` says (docs/operations.md).
enum LoggingBootstrap {
    static func bootstrap(_ settings: LoggingSettings) -> Logger {
        let level = settings.level.swiftLogLevel
        switch settings.format {
        case .text:
            LoggingSystem.bootstrap { label in TextLogHandler(label: label, level: level) }
        case .json:
            LoggingSystem.bootstrap { label in JSONLogHandler(label: label, level: level) }
        }
        var logger = Logger(label: "pushbridge")
        logger.logLevel = level
        return logger
    }
}

extension LoggingSettings.Level {
    var swiftLogLevel: Logger.Level {
        switch self {
        case .trace: .trace
        case .debug: .debug
        case .info: .info
        case .notice: .notice
        case .warning: .warning
        case .error: .error
        }
    }
}

/// Builds the APNs sender for `run` from the `apns` and `apps` blocks.
enum APNSSenderFactory {
    static func make(for configuration: BridgeConfiguration, logger: Logger) throws -> any ManagedSender {
        try APNSSender(configuration: configuration, logger: logger)
    }
}
