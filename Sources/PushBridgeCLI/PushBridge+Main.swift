import ArgumentParser

extension PushBridge {
    /// Parses and runs the command. Usage errors (an unknown or missing option, a bad value) exit with status 2
    /// as docs/operations.md "Running it" says, instead of swift-argument-parser's 64; everything else exits as the parser decides.
    static func main() async {
        do {
            var command = try parseAsRoot()
            if var asyncCommand = command as? any AsyncParsableCommand {
                try await asyncCommand.run()
            } else {
                try command.run()
            }
        } catch {
            if exitCode(for: error) == .validationFailure {
                FileHandleOutput.standardError(fullMessage(for: error) + "\n")
                Self.exit(withError: ExitCode(2))
            }
            Self.exit(withError: error)
        }
    }
}
