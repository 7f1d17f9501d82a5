import ArgumentParser

/// `pushbridge render`: Print the APNs requests an event would produce through a route. Sends nothing.
struct RenderCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "render",
        abstract: "Print the APNs requests an event would produce through a route. Sends nothing. (not available yet in this build)"
    )

    func run() async throws {
        FileHandleOutput.standardError("pushbridge render is not available yet in this build\n")
        throw ExitCode(1)
    }
}
