import ArgumentParser

/// `pushbridge send`: Send one notification to APNs and print the result.
struct SendCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "send",
        abstract: "Send one notification to APNs and print the result. (not available yet in this build)"
    )

    func run() async throws {
        FileHandleOutput.standardError("pushbridge send is not available yet in this build\n")
        throw ExitCode(1)
    }
}
