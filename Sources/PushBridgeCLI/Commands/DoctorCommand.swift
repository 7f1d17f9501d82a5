import ArgumentParser
import Configuration
import DoctorChecks

/// `pushbridge doctor`: checks what usually goes wrong in production, one line per check with a fix hint.
struct DoctorCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "doctor",
        abstract: "Check credentials, certificates, clock, Kafka and APNs reachability, one line per check.",
        discussion: """
            Loads the configuration like validate (problems: exit 2), then checks, for the apns block and every \
            app: the key or certificate, the certificate's expiry, environment and topics, TCP, TLS (verified, \
            ALPN h2, the server's SETTINGS), whether APNs accepts the credentials (one request to an all-zero \
            device token; nothing is delivered), and the clock against the server's date; then whether Kafka \
            answers and every input and result topic exists. Each line starts with ok, WARN or FAIL. Exit 1 when \
            any check fails, else 0. See docs/operations.md, "pushbridge doctor".
            """
    )

    @OptionGroup var configurationFile: ConfigurationOption

    @Option(help: ArgumentHelp("How long the Kafka metadata request may take, in seconds.", valueName: "seconds"))
    var kafkaTimeout: Int = 10

    @Option(help: ArgumentHelp("How long connecting to APNs and the probe may take, in seconds.", valueName: "seconds"))
    var apnsTimeout: Int = 10

    /// The longest `--kafka-timeout` and `--apns-timeout`, in seconds.
    static let maximumTimeoutSeconds = 600

    /// Out-of-range timeouts are usage errors (exit 2); unbounded, they overflowed in millisecond arithmetic.
    func validate() throws {
        for (option, value) in [("--kafka-timeout", self.kafkaTimeout), ("--apns-timeout", self.apnsTimeout)]
        where !(1...Self.maximumTimeoutSeconds).contains(value) {
            throw ValidationError(
                "\(option) must be between 1 and \(Self.maximumTimeoutSeconds) seconds, got \(value)")
        }
    }

    func run() async throws {
        let loaded = try self.load()
        let doctor = Doctor(
            configuration: loaded.configuration,
            options: Doctor.Options(
                kafkaTimeout: .seconds(self.kafkaTimeout), apnsTimeout: .seconds(self.apnsTimeout))
        )
        let checks = await doctor.run()
        for check in checks {
            FileHandleOutput.standardOutput("\(check)\n")
        }
        let failed = checks.filter { $0.status == .fail }.count
        let warned = checks.filter { $0.status == .warn }.count
        FileHandleOutput.standardOutput(
            "\(checks.count) checks: \(failed) failed, \(warned) warning\(warned == 1 ? "" : "s")\n")
        if failed > 0 {
            throw ExitCode(1)
        }
    }

    /// Loads like `validate`, except that a credential file that does not parse is left to the credentials check
    /// (a failing line with a fix, exit 1) instead of being a configuration problem (exit 2).
    private func load() throws -> LoadedConfiguration {
        do {
            return try ConfigurationLoader().load(file: self.configurationFile.path)
        } catch let error where error.problems.allSatisfy({ $0.code == .credentialFile }) {
            return try self.configurationFile.load(checksCredentialFiles: false)
        } catch {
            return try self.configurationFile.load()
        }
    }
}
