import Foundation
import TestSupport

/// franz-go's kfake, an in-memory Kafka cluster whose group coordinator follows Apache Kafka's, run as
/// `.build-kfake/kfake-broker` (tools/kfake-broker, built by scripts/kfake-build.sh; docs/kafka.md, "The kfake lane").
///
/// The process prints `{"bootstrap": "…"}` once its brokers listen, then takes `topic NAME PARTITIONS` and
/// `drop SECONDS` on its standard input; it exits when that input closes, so it never outlives the soak.
final class KfakeBroker: TestKafkaBroker {
    let bootstrapServers: String
    private let process: BrokerProcess

    static let binary = RepositoryPaths.root.appendingPathComponent(".build-kfake/kfake-broker")

    static var isBuilt: Bool { FileManager.default.isExecutableFile(atPath: Self.binary.path) }

    static let notBuiltMessage =
        "\(binary.path) is not built: run scripts/kfake-build.sh (it needs Go's module proxy, or KFAKE_SOURCES)"

    private init(bootstrap: String, process: BrokerProcess) {
        self.bootstrapServers = bootstrap
        self.process = process
    }

    /// Starts three brokers; waits at most `timeout` for them to listen.
    static func start(maxLifetime: Duration, timeout: Duration = .seconds(30)) async throws -> KfakeBroker {
        guard Self.isBuilt else { throw SoakError(Self.notBuiltMessage) }
        let process = try await BrokerProcess.start(
            "kfake", executable: Self.binary,
            arguments: ["-brokers", "3", "-max-seconds", "\(maxLifetime.components.seconds)"], timeout: timeout)
        guard let bootstrap = process.addresses["bootstrap"] else {
            await process.stop()
            throw SoakError("kfake-broker printed \(process.addresses), not its bootstrap servers")
        }
        return KfakeBroker(bootstrap: bootstrap, process: process)
    }

    func addTopic(_ topic: String, partitions: Int32) async throws {
        try self.process.send("topic \(topic) \(partitions)")
        let deadline = ContinuousClock.now + .seconds(40)
        while ContinuousClock.now < deadline {
            if let answer = self.process.lines.last(where: { $0.hasPrefix("topic \(topic) ") }) {
                guard answer == "topic \(topic) ok" else { throw SoakError("kfake-broker: \(answer)") }
                return
            }
            try await Task.sleep(for: .milliseconds(20))
        }
        throw SoakError("kfake-broker did not create \(topic) within 40 s")
    }

    /// Every broker unreachable for `duration`: open connections are reset and new ones closed, while the cluster
    /// keeps its data and groups. Returns at once.
    func dropConnections(for duration: Duration) throws {
        try self.process.dropConnections(for: duration)
    }

    /// Stops it (at most 10 s before SIGKILL).
    func stop() async {
        await self.process.stop()
    }
}
