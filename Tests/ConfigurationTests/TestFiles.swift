import Configuration
import Crypto
import Foundation
import TestSupport

/// A temporary directory with the credential files a configuration names, removed when the value is dropped.
final class TestFiles: Sendable {
    /// The directory.
    let directory: String

    /// A fresh directory holding `AuthKey_TEST000001.p8` (a new P-256 key), `ca.pem` (a PEM certificate block)
    /// and `p12-password` (a secret with a trailing newline).
    init() throws {
        let directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("pushbridge-config-tests-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        self.directory = directory
        try self.write("AuthKey_TEST000001.p8", P256.Signing.PrivateKey().pemRepresentation + "\n")
        try self.write("AuthKey_DEMO000001.p8", P256.Signing.PrivateKey().pemRepresentation + "\n")
        try self.write("simulator-ca.pem", Self.certificatePEM)
        try self.write("ca.pem", Self.certificatePEM)
        try self.write("p12-password", "s3cret-p12-password\n")
        try self.write("push.p12", "\u{30}\u{82}binary")
    }

    deinit {
        try? FileManager.default.removeItem(atPath: self.directory)
    }

    /// The path of `name` in the directory.
    func path(_ name: String) -> String {
        self.directory + "/" + name
    }

    /// Writes `contents` to `name` in the directory.
    func write(_ name: String, _ contents: String) throws {
        try Data(contents.utf8).write(to: URL(fileURLWithPath: self.path(name)))
    }

    /// The environment the test configurations expect: `KEY_FILE`, `CA_FILE` and the example files' variables.
    var environment: [String: String] {
        [
            "KEY_FILE": self.path("AuthKey_TEST000001.p8"),
            "CA_FILE": self.path("ca.pem"),
            "APNS_KEY_FILE": self.path("AuthKey_TEST000001.p8"),
            "APNS_SANDBOX_KEY_FILE": self.path("AuthKey_TEST000001.p8"),
            "PUSHBRIDGE_DEMO_DIR": self.directory,
        ]
    }

    /// The token auth of ``minimalYAML``: the generated key, key ID `ABC123DEFG`, team ID `DEF123GHIJ`.
    var tokenAuth: APNSAuth {
        .token(keyFile: self.path("AuthKey_TEST000001.p8"), keyID: "ABC123DEFG", teamID: "DEF123GHIJ")
    }

    /// Loads `yaml` with this directory's environment plus `extra`.
    func load(_ yaml: String, environment extra: [String: String] = [:], checksFiles: Bool = true)
        throws(ConfigurationErrors) -> LoadedConfiguration
    {
        let environment = self.environment.merging(extra) { $1 }
        return try ConfigurationLoader(environment: environment, checksCredentialFiles: checksFiles)
            .load(yaml: yaml, file: "test.yaml")
    }

    /// The problems loading `yaml` reports (empty when it loads).
    func problems(_ yaml: String, environment extra: [String: String] = [:]) -> [ConfigurationProblem] {
        do {
            _ = try self.load(yaml, environment: extra)
            return []
        } catch {
            return error.problems
        }
    }

    /// A certificate in PEM (the loader checks the PEM framing of `ca_file`; TLS parses it later).
    static let certificatePEM = """
        -----BEGIN CERTIFICATE-----
        MIIBdzCCAR2gAwIBAgIUQ2VydGlmaWNhdGVGb3JUZXN0c0FuZE5vdGhpbmdFbHNlMAoGCCqGSM49BAMC
        -----END CERTIFICATE-----

        """
}

/// The smallest valid configuration, line by line, so tests can name lines. Key file from `${KEY_FILE}`.
let minimalYAML = """
    kafka:
      bootstrap_servers: embedded
    apns:
      auth:
        type: token
        key_file: ${KEY_FILE}
        key_id: ABC123DEFG
        team_id: DEF123GHIJ
    routes:
      - name: greeting
        input_topic: greetings
        device_tokens: "{{token}}"
        topic: com.example.app
        payload:
          aps:
            alert: "{{text}}"

    """

/// The repository's root directory.
let repositoryRoot = RepositoryPaths.root.path
