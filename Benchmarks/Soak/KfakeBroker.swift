import Foundation
import TestSupport

#if canImport(Glibc)
    import Glibc
#endif

/// franz-go's kfake, an in-memory Kafka cluster whose group coordinator follows Apache Kafka's, run as
/// `.build-kfake/kfake-broker` (tools/kfake-broker, built by scripts/kfake-build.sh; docs/kafka.md, "The kfake lane").
///
/// The process prints `{"bootstrap": "…"}` once its brokers listen, then takes `topic NAME PARTITIONS` and
/// `drop SECONDS` on its standard input; it exits when that input closes, so it never outlives the soak.
final class KfakeBroker: TestKafkaBroker, @unchecked Sendable {
    let bootstrapServers: String
    private let process: Process
    private let input: Pipe
    private let outputURL: URL
    private let errorURL: URL
    /// Serialises `addTopic`: each waits for its own answer line.
    private let topicLock = NSLock()

    static let binary = RepositoryPaths.root.appendingPathComponent(".build-kfake/kfake-broker")

    static var isBuilt: Bool { FileManager.default.isExecutableFile(atPath: Self.binary.path) }

    static let notBuiltMessage =
        "\(binary.path) is not built: run scripts/kfake-build.sh (it needs Go's module proxy, or KFAKE_SOURCES)"

    private init(bootstrap: String, process: Process, input: Pipe, outputURL: URL, errorURL: URL) {
        self.bootstrapServers = bootstrap
        self.process = process
        self.input = input
        self.outputURL = outputURL
        self.errorURL = errorURL
    }

    /// Starts three brokers; waits at most `timeout` for them to listen.
    static func start(maxLifetime: Duration, timeout: Duration = .seconds(30)) async throws -> KfakeBroker {
        guard Self.isBuilt else { throw SoakError(Self.notBuiltMessage) }
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("kfake-\(UUID())")
        try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true)
        let outputURL = scratch.appendingPathComponent("stdout")
        let errorURL = scratch.appendingPathComponent("stderr")
        _ = FileManager.default.createFile(atPath: outputURL.path, contents: nil)
        _ = FileManager.default.createFile(atPath: errorURL.path, contents: nil)
        let process = Process()
        process.executableURL = Self.binary
        process.arguments = ["-brokers", "3", "-max-seconds", "\(maxLifetime.components.seconds)"]
        let input = Pipe()
        process.standardInput = input
        process.standardOutput = try FileHandle(forWritingTo: outputURL)
        process.standardError = try FileHandle(forWritingTo: errorURL)
        try process.run()
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if let line = Self.lines(of: outputURL).first {
                let fields = try JSONDecoder().decode([String: String].self, from: Data(line.utf8))
                guard let bootstrap = fields["bootstrap"] else { break }
                return KfakeBroker(
                    bootstrap: bootstrap, process: process, input: input, outputURL: outputURL, errorURL: errorURL)
            }
            if !process.isRunning { break }
            try await Task.sleep(for: .milliseconds(50))
        }
        process.terminate()
        let reason = String(decoding: (try? Data(contentsOf: errorURL)) ?? Data(), as: UTF8.self)
        throw SoakError("kfake-broker did not start within \(timeout): \(reason)")
    }

    /// The complete lines the process has printed so far.
    private static func lines(of url: URL) -> [String] {
        let text = String(decoding: (try? Data(contentsOf: url)) ?? Data(), as: UTF8.self)
        return text.split(separator: "\n", omittingEmptySubsequences: true).dropLast(text.hasSuffix("\n") ? 0 : 1)
            .map(String.init)
    }

    func addTopic(_ topic: String, partitions: Int32) async throws {
        try self.input.fileHandleForWriting.write(contentsOf: Data("topic \(topic) \(partitions)\n".utf8))
        let deadline = ContinuousClock.now + .seconds(40)
        while ContinuousClock.now < deadline {
            if let answer = Self.lines(of: self.outputURL).last(where: { $0.hasPrefix("topic \(topic) ") }) {
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
        let seconds = Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
        try self.input.fileHandleForWriting.write(contentsOf: Data("drop \(seconds)\n".utf8))
    }

    /// Closes its standard input (it exits) and waits at most 10 s before SIGKILL.
    func stop() async {
        try? self.input.fileHandleForWriting.close()
        let deadline = ContinuousClock.now + .seconds(10)
        while self.process.isRunning, ContinuousClock.now < deadline { try? await Task.sleep(for: .milliseconds(20)) }
        if self.process.isRunning { kill(self.process.processIdentifier, SIGKILL) }
    }
}
