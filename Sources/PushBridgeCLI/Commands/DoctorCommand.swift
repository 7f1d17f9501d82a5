import ArgumentParser

/// `pushbridge doctor`: Check credentials, clock, Kafka and APNs reachability, one line per check.
struct DoctorCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "doctor",
        abstract: "Check credentials, clock, Kafka and APNs reachability, one line per check. (not available yet in this build)"
    )

    func run() async throws {
        FileHandleOutput.standardError("pushbridge doctor is not available yet in this build\n")
        throw ExitCode(1)
    }
}
