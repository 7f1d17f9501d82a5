import ArgumentParser

/// `pushbridge validate`: Load the configuration and every route and template; list every problem.
struct ValidateCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "validate",
        abstract: "Load the configuration and every route and template; list every problem. (not available yet in this build)"
    )

    func run() async throws {
        FileHandleOutput.standardError("pushbridge validate is not available yet in this build\n")
        throw ExitCode(1)
    }
}
