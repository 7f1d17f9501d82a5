import ArgumentParser

/// `pushbridge simulator`: Run the APNs simulator standalone.
struct SimulatorCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "simulator",
        abstract: "Run the APNs simulator standalone. (not available yet in this build)"
    )

    func run() async throws {
        FileHandleOutput.standardError("pushbridge simulator is not available yet in this build\n")
        throw ExitCode(1)
    }
}
