import ArgumentParser

/// `pushbridge run`: Run the bridge until SIGTERM/SIGINT, then drain and stop cleanly.
struct RunCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "run",
        abstract: "Run the bridge until SIGTERM/SIGINT, then drain and stop cleanly. (not available yet in this build)"
    )

    func run() async throws {
        FileHandleOutput.standardError("pushbridge run is not available yet in this build\n")
        throw ExitCode(1)
    }
}
