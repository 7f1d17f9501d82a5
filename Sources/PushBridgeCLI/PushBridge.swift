import ArgumentParser

/// The `pushbridge` executable: one command per job (README.md, "Commands").
///
/// Exit status: 0 success, 1 a failure the output explains, 2 wrong usage or invalid configuration.
@main
struct PushBridge: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "pushbridge",
        abstract: "Bridge Kafka events to the Apple Push Notification service.",
        subcommands: [
            RunCommand.self,
            DemoCommand.self,
            ValidateCommand.self,
            RenderCommand.self,
            SendCommand.self,
            SimulatorCommand.self,
            DoctorCommand.self,
            ChannelsCommand.self,
        ]
    )
}
