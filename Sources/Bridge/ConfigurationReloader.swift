import APNSClient
import BridgeCore
import Configuration
import Logging
import ServiceLifecycle
import Synchronization
import UnixSignals

import struct Foundation.Date

/// Reloads the configuration while the bridge runs (docs/configuration.md, "Reloading"): on SIGHUP, and when the
/// configuration file or a file it names changed (polled every ``Options/pollInterval``: each file's resolved path,
/// device, inode, size and modification time, see ``FileIdentity``; a change must be seen at two polls in a row, so
/// one change reloads once).
///
/// A reload reads and checks the whole file as `pushbridge validate` does. What it can apply, it applies without
/// leaving the consumer group: the routes and templates and `apns.retry` from the next event on (``Pipeline/reload(_:)``),
/// and, when the `apns` block, an app or a file they name changed, new APNs senders with the new credentials and
/// connection settings for the next requests (``ReloadableSender``). A configuration that does not load, or that
/// changes a key that applies only at a restart (``ConfigurationChange``), is refused with one log line saying why,
/// and the previous configuration keeps running. Reloads run one at a time, off the pipeline's path.
package final class ConfigurationReloader: Service, Sendable {
    /// What the reloader needs besides the running parts.
    package struct Options: Sendable {
        /// The configuration file, as `run` was given it.
        package var configurationFile: String
        /// What `${VAR}` references expand from: the process's environment at start (it cannot change later).
        package var environment: [String: String]
        /// What the running configuration was read from.
        package var reading: ConfigurationReading
        /// Builds the senders for a configuration (they load the credentials); `nil` when the senders are not
        /// replaced on reload (`run --log-sender`).
        package var makeSender: (@Sendable (BridgeConfiguration) throws -> any ManagedSender)?
        /// How often the watched files are looked at.
        package var pollInterval: Duration
        /// The signals that reload.
        package var signals: [UnixSignal]
        /// Whether the configuration loader reads credential files (off with `--log-sender`).
        package var checksCredentialFiles: Bool

        /// Creates options; by default SIGHUP reloads and the files are polled every 2 s.
        package init(
            configurationFile: String,
            environment: [String: String],
            reading: ConfigurationReading,
            makeSender: (@Sendable (BridgeConfiguration) throws -> any ManagedSender)?,
            pollInterval: Duration = ConfigurationReloader.defaultPollInterval,
            signals: [UnixSignal] = [.sighup],
            checksCredentialFiles: Bool = true
        ) {
            self.configurationFile = configurationFile
            self.environment = environment
            self.reading = reading
            self.makeSender = makeSender
            self.pollInterval = pollInterval
            self.signals = signals
            self.checksCredentialFiles = checksCredentialFiles
        }
    }

    /// How often the watched files are looked at unless told otherwise.
    package static let defaultPollInterval: Duration = .seconds(2)

    /// What made a reload start.
    package enum Trigger: Sendable, Hashable, CustomStringConvertible {
        /// A signal (SIGHUP).
        case signal
        /// The watched files changed.
        case files

        package var description: String {
            switch self {
            case .signal: "signal"
            case .files: "files changed"
            }
        }
    }

    /// The configuration in force and what it was read from.
    private struct State: Sendable {
        var configuration: BridgeConfiguration
        var files: ConfigurationFiles
        var hash: String?
        var detector: FileChangeDetector
        /// The identities of the named files when the senders in force loaded them.
        var senderFiles: [String: FileIdentity]
    }

    private let options: Options
    private let pipeline: Pipeline
    private let sender: ReloadableSender?
    private let feedback: FeedbackPollers?
    private let metrics: ReloadMetrics
    private let logger: Logger
    private let state: Mutex<State>

    /// A reloader of `configuration` (running, read as `options.reading`) into `pipeline` and `sender`.
    package init(
        options: Options, configuration: BridgeConfiguration, pipeline: Pipeline, sender: ReloadableSender?,
        feedback: FeedbackPollers? = nil, metrics: ReloadMetrics, logger: Logger
    ) {
        self.options = options
        self.pipeline = pipeline
        self.sender = sender
        self.feedback = feedback
        self.metrics = metrics
        self.logger = logger
        self.state = Mutex(
            State(
                configuration: configuration, files: options.reading.files, hash: options.reading.hash,
                detector: FileChangeDetector(baseline: options.reading.identities),
                senderFiles: options.reading.identities))
    }

    /// Watches and reloads until graceful shutdown.
    package func run() async throws {
        let signals = await UnixSignalsSequence(trapping: self.options.signals)
        self.logger.info(
            "Configuration reloads on SIGHUP and when the watched files change",
            metadata: [
                "config.hash": "\(self.state.withLock { $0.hash } ?? "")",
                "reload.files": "\(self.state.withLock { $0.files.paths }.joined(separator: ","))",
                "reload.poll_interval": "\(self.options.pollInterval)",
            ])
        let (triggers, continuation) = AsyncStream<Trigger>.makeStream(bufferingPolicy: .bufferingNewest(4))
        await withDiscardingTaskGroup { group in
            group.addTask {
                for await _ in signals { continuation.yield(.signal) }
            }
            group.addTask {
                while (try? await Task.sleep(for: self.options.pollInterval)) != nil {
                    if self.filesChanged() { continuation.yield(.files) }
                }
            }
            await cancelWhenGracefulShutdown {
                for await trigger in triggers {
                    _ = await self.reload(trigger)
                }
            }
            group.cancelAll()
        }
    }

    /// One poll: whether the watched files changed for good since they were last read.
    func filesChanged() -> Bool {
        let files = self.state.withLock { $0.files }
        let snapshot = files.identities()
        return self.state.withLock { $0.detector.observe(snapshot) }
    }

    /// Reads the configuration again and applies it, or refuses it; returns how it ended. One at a time.
    @discardableResult
    package func reload(_ trigger: Trigger) async -> ReloadMetrics.Result {
        let running = self.state.withLock { $0 }
        let reading = ConfigurationReading.read(
            file: self.options.configurationFile, environment: self.options.environment, fallback: running.files)
        // Whatever the result, these versions of the files have been looked at: only a later change reloads again.
        self.state.withLock { state in
            state.files = reading.files
            state.detector.loaded(reading.identities)
        }
        let changedFiles = reading.files.namedFiles.filter { reading.identities[$0] != running.senderFiles[$0] }
        var metadata: Logger.Metadata = [
            "reload.trigger": "\(trigger)", "config.hash": "\(reading.hash ?? "")",
        ]
        if !changedFiles.isEmpty { metadata["reload.changed_files"] = "\(changedFiles.joined(separator: ","))" }

        let loaded: LoadedConfiguration
        do {
            let loader = ConfigurationLoader(
                environment: self.options.environment, checksCredentialFiles: self.options.checksCredentialFiles)
            loaded = try reading.load(with: loader)
        } catch {
            // Problems name keys and files, never a secret value (docs/configuration.md, "Secrets in errors").
            metadata["config.problems"] = "\(error.problems.map(\.description).joined(separator: "; "))"
            return self.refuse(
                .failed, "Configuration not reloaded: it does not load; the previous configuration keeps running",
                metadata)
        }
        let change = ConfigurationChange(from: running.configuration, to: loaded.configuration)
        if !change.restartOnly.isEmpty {
            metadata["config.keys"] = "\(change.restartOnly.map(\.description).joined(separator: ", "))"
            return self.refuse(
                .refused,
                "Configuration not reloaded: a key changed that applies only at a restart; the previous configuration keeps running",
                metadata)
        }
        // A feedback poller reads its app's certificate when it is made: a changed file means a new poller.
        var feedbackChanges = change.feedback
        for app in loaded.configuration.feedbackApps {
            let key = ConfigurationChange.key(app: app.name)
            if !feedbackChanges.contains(key), Self.files(of: app.settings).contains(where: changedFiles.contains) {
                feedbackChanges.append(key)
            }
        }
        let replacesSenders = change.changesSenders || !changedFiles.isEmpty
        if !replacesSenders, change.live.isEmpty, feedbackChanges.isEmpty, reading.hash == running.hash {
            self.metrics.reloaded(.unchanged)
            self.logger.info("Configuration unchanged", metadata: metadata)
            return .unchanged
        }
        var newPollers: [FeedbackPoller]?
        if !feedbackChanges.isEmpty, let feedback = self.feedback {
            do {
                newPollers = try feedback.make(loaded.configuration)
            } catch {
                metadata["config.problems"] = "\(error)"
                return self.refuse(
                    .failed,
                    "Configuration not reloaded: its feedback pollers' credentials do not load; the previous configuration keeps running",
                    metadata)
            }
        }

        var newSender: (any ManagedSender)?
        if replacesSenders, let makeSender = self.options.makeSender, self.sender != nil {
            do {
                newSender = try makeSender(loaded.configuration)
            } catch {
                metadata["config.problems"] = "\(error)"
                return self.refuse(
                    .failed,
                    "Configuration not reloaded: its credentials do not load; the previous configuration keeps running",
                    metadata)
            }
        }
        // The lanes first: the new routes may name a new lane.
        if change.live.contains("lanes") { self.pipeline.reloadLanes(loaded.configuration.laneBudgets) }
        let retry = loaded.configuration.apns.retry
        self.pipeline.reload(
            Pipeline.LiveSettings(
                mapper: RouterMapper(router: loaded.router), maxAttempts: retry.maxAttempts,
                retryBackoff: Backoff(initial: retry.initialBackoff, maximum: retry.maxBackoff)))
        if let newSender, let sender = self.sender {
            await sender.replace(with: newSender)
            self.metrics.credentialsLoaded(
                Self.credentials(of: loaded.configuration), atEpochSeconds: Self.epochSeconds())
        }
        if let newPollers { self.feedback?.replace(with: newPollers) }
        self.state.withLock { state in
            state.configuration = loaded.configuration
            state.hash = reading.hash
            if newSender != nil || newPollers != nil { state.senderFiles = reading.identities }
        }
        if let hash = reading.hash { self.metrics.configuration(hash: hash) }
        self.metrics.reloaded(.applied)
        metadata["reload.apns"] = "\(newSender != nil ? "new senders for the next requests" : "unchanged")"
        if !change.live.isEmpty { metadata["reload.changed"] = "\(change.live.joined(separator: ","))" }
        if newPollers != nil { metadata["reload.feedback"] = "\(feedbackChanges.sorted().joined(separator: ","))" }
        self.logger.notice("Configuration reloaded", metadata: metadata)
        return .applied
    }

    private func refuse(_ result: ReloadMetrics.Result, _ message: Logger.Message, _ metadata: Logger.Metadata)
        -> ReloadMetrics.Result
    {
        self.metrics.reloaded(result)
        self.logger.warning(message, metadata: metadata)
        return result
    }

    /// The files an `apns`-shaped block names: its credentials and CA file (a `.p12` password file shows as a changed
    /// password in the settings themselves).
    static func files(of settings: APNSSettings) -> [String] {
        var files: [String]
        switch settings.auth {
        case .token(let keyFile, _, _): files = [keyFile]
        case .pkcs12(let file, _): files = [file]
        case .pem(let certificateFile, let keyFile): files = [certificateFile, keyFile]
        }
        if let caFile = settings.caFile { files.append(caFile) }
        return files
    }

    /// Every app's credential as the metrics show it: a certificate's not-after, nothing for a `.p8` key. A
    /// certificate that does not load (the senders would have refused it) shows no expiry.
    package static func credentials(of configuration: BridgeConfiguration) -> [ReloadMetrics.Credential] {
        let apps = [("default", configuration.apns)] + configuration.apps.sorted { $0.key < $1.key }
        return apps.map { app, settings in
            let expiry: Int64?
            switch settings.auth {
            case .token: expiry = nil
            case .pkcs12(let file, let password):
                expiry = try? CertificateCredentials.load(p12Path: file, password: password?.value ?? "")
                    .notValidAfterEpochSeconds
            case .pem(let certificateFile, let keyFile):
                expiry = try? CertificateCredentials.load(certificatePEMPath: certificateFile, keyPEMPath: keyFile)
                    .notValidAfterEpochSeconds
            }
            return ReloadMetrics.Credential(app: app, expiryEpochSeconds: expiry)
        }
    }

    static func epochSeconds() -> Int64 { Int64(Date().timeIntervalSince1970) }
}
