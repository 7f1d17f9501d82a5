import ArgumentParser
import Configuration

/// `--config FILE`, shared by the commands that read the configuration.
struct ConfigurationOption: ParsableArguments {
    @Option(
        name: .long,
        help: ArgumentHelp(
            "The configuration file (default: $PUSHBRIDGE_CONFIG, then config/pushbridge.yaml).",
            valueName: "file"
        )
    )
    var config: String?

    /// The file to load.
    var path: String {
        self.config ?? ConfigurationLoader.defaultPath()
    }

    /// Loads the configuration; on problems prints every one of them to standard error and exits with 2.
    func load(checksCredentialFiles: Bool = true) throws -> LoadedConfiguration {
        do {
            return try ConfigurationLoader(checksCredentialFiles: checksCredentialFiles).load(file: self.path)
        } catch {
            var text = error.problems.map { "\($0)\n" }.joined()
            let count = error.problems.count
            text += "\(self.path): \(count) problem\(count == 1 ? "" : "s") found\n"
            FileHandleOutput.standardError(text)
            throw ExitCode(2)
        }
    }
}
