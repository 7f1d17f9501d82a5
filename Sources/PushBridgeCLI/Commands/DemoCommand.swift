import ArgumentParser

/// `pushbridge demo`: Run an embedded Kafka cluster, the APNs simulator and the bridge on sample events.
struct DemoCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "demo",
        abstract: "Run an embedded Kafka cluster, the APNs simulator and the bridge on sample events. (not available yet in this build)"
    )

    func run() async throws {
        FileHandleOutput.standardError("pushbridge demo is not available yet in this build\n")
        throw ExitCode(1)
    }
}
