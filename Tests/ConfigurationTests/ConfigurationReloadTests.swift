import Configuration
import Foundation
import Routing
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Noticing that the configuration or a file it names changed (docs/configuration.md, "Reloading").
@Suite struct ConfigurationFileChangeTests {
    let files: TestFiles

    init() throws {
        self.files = try TestFiles()
    }

    /// A Kubernetes Secret volume as the kubelet writes it: the files in a timestamped directory, `..data` a symlink to
    /// it, and each visible name a symlink through `..data`. An update writes a new directory and renames a new
    /// `..data` symlink over the old one.
    struct SecretVolume {
        let directory: String

        init(in parent: String, files: [String: String]) throws {
            self.directory = parent + "/volume"
            try FileManager.default.createDirectory(atPath: self.directory, withIntermediateDirectories: true)
            try self.update(files, version: "..2026_11_27_10_00_00.1")
            for name in files.keys {
                try FileManager.default.createSymbolicLink(
                    atPath: self.directory + "/" + name, withDestinationPath: "..data/" + name)
            }
        }

        /// Writes `files` into a new version directory and swaps `..data` onto it at once, as the kubelet does; every
        /// file's modification time is set to the same instant, so only the swap itself can tell the versions apart.
        func update(_ files: [String: String], version: String) throws {
            let versionPath = self.directory + "/" + version
            try FileManager.default.createDirectory(atPath: versionPath, withIntermediateDirectories: false)
            for (name, contents) in files {
                let path = versionPath + "/" + name
                try Data(contents.utf8).write(to: URL(fileURLWithPath: path))
                try FileManager.default.setAttributes(
                    [.modificationDate: Date(timeIntervalSince1970: 1_790_000_000)], ofItemAtPath: path)
            }
            try FileManager.default.createSymbolicLink(
                atPath: self.directory + "/..data_tmp", withDestinationPath: version)
            #expect(rename(self.directory + "/..data_tmp", self.directory + "/..data") == 0)
        }
    }

    @Test("a Kubernetes ..data symlink swap changes a file's identity, even with the same size and modification time")
    func symlinkSwapChangesIdentity() throws {
        let volume = try SecretVolume(in: self.files.directory, files: ["AuthKey.p8": "key one"])
        let path = volume.directory + "/AuthKey.p8"
        let before = try #require(FileIdentity.of(path: path))
        #expect(before.resolvedPath.hasSuffix("..2026_11_27_10_00_00.1/AuthKey.p8"))
        #expect(FileIdentity.of(path: path) == before, "nothing changed, yet the identity did")

        try volume.update(["AuthKey.p8": "key two"], version: "..2026_11_27_10_05_00.2")
        let after = try #require(FileIdentity.of(path: path))
        #expect(after.sizeBytes == before.sizeBytes && after.modifiedNanoseconds == before.modifiedNanoseconds)
        #expect(after != before)
        #expect(after.inode != before.inode)
    }

    @Test("a file rewritten in place changes its identity; a missing file has none")
    func rewriteAndMissing() throws {
        let path = self.files.path("AuthKey_TEST000001.p8")
        let before = try #require(FileIdentity.of(path: path))
        try self.files.write("AuthKey_TEST000001.p8", "a different key, of another length")
        #expect(FileIdentity.of(path: path) != before)
        #expect(FileIdentity.of(path: self.files.path("no-such-file")) == nil)
    }

    @Test("a change is acted on once, at the second poll that sees it; a file written in steps reloads once")
    func detectorDebounces() {
        let a = ["config.yaml": Self.identity(1)]
        let b = ["config.yaml": Self.identity(2)]
        let c = ["config.yaml": Self.identity(3)]
        var detector = FileChangeDetector(baseline: a)
        // Reloaded at the second sight of the change, not at the first.
        #expect([a, b, b].map { detector.observe($0) } == [false, false, true])
        detector.loaded(b)
        #expect([b, b].map { detector.observe($0) } == [false, false], "the same change reloaded twice")
        // Written in steps: each poll sees another version; the reload waits for the last one.
        #expect([c, a, c, c].map { detector.observe($0) } == [false, false, false, true])
    }

    @Test("a change that is undone before the next poll reloads nothing")
    func undoneChange() {
        let a = ["key.p8": Self.identity(1)]
        var detector = FileChangeDetector(baseline: a)
        #expect([["key.p8": Self.identity(2)], a, a].map { detector.observe($0) } == [false, false, false])
    }

    @Test("a file that appears or disappears is a change")
    func appearingAndDisappearing() {
        let before = ["config.yaml": Self.identity(1)]
        let appeared = ["config.yaml": Self.identity(1), "ca.pem": Self.identity(5)]
        var detector = FileChangeDetector(baseline: before)
        #expect([appeared, appeared].map { detector.observe($0) } == [false, true])
        detector.loaded(appeared)
        #expect([before, before].map { detector.observe($0) } == [false, true])
    }

    @Test("the watched files: the configuration and every *_file value in it, expanded, each once")
    func namedFiles() throws {
        let yaml = """
            kafka:
              bootstrap_servers: embedded
              properties:
                sasl.password_file: /run/secrets/kafka/password
            apns:
              ca_file: ${CA_FILE}
              auth: { type: token, key_file: "${DIR}/AuthKey.p8", key_id: ABC123DEFG, team_id: DEF123GHIJ }
            apps:
              legacy:
                auth: { type: certificate, p12_file: /run/secrets/push.p12, p12_password_file: /run/secrets/pass }
                ca_file: ${CA_FILE}
              broken:
                auth: { type: token, key_file: "${UNSET_VARIABLE}", key_id: ABC123DEFG, team_id: DEF123GHIJ }
            routes: []
            """
        let files = try #require(
            ConfigurationFiles.named(
                inYAML: yaml, file: "pushbridge.yaml", environment: ["CA_FILE": "/etc/ca.pem", "DIR": "/keys"]))
        #expect(
            files.paths == [
                "pushbridge.yaml", "/run/secrets/kafka/password", "/etc/ca.pem", "/keys/AuthKey.p8",
                "/run/secrets/push.p12", "/run/secrets/pass",
            ])
        #expect(ConfigurationFiles.named(inYAML: "kafka: [", file: "x.yaml", environment: [:]) == nil)
    }

    @Test("a reading keeps watching the running configuration's files when the new file does not parse")
    func readingFallsBack() throws {
        let path = self.files.path("pushbridge.yaml")
        try self.files.write("pushbridge.yaml", "kafka: [")
        let fallback = ConfigurationFiles(configurationFile: path, namedFiles: [self.files.path("ca.pem")])
        let reading = ConfigurationReading.read(file: path, environment: [:], fallback: fallback)
        #expect(reading.files == fallback)
        #expect(reading.identities[self.files.path("ca.pem")] != nil)
        #expect(reading.hash == ConfigurationHash.of(Array("kafka: [".utf8)))
        #expect(throws: ConfigurationErrors.self) { try reading.load(with: ConfigurationLoader(environment: [:])) }
    }

    @Test("the configuration hash is the first 12 hex digits of the file's SHA-256")
    func hash() {
        // sha256sum of the empty file: e3b0c44298fc1c149afbf4c8996fb924...
        #expect(ConfigurationHash.of([UInt8]()) == "e3b0c44298fc")
        #expect(ConfigurationHash.of(Array("abc".utf8)) == "ba7816bf8f01")
    }

    static func identity(_ inode: UInt64) -> FileIdentity {
        FileIdentity(resolvedPath: "/x", device: 1, inode: inode, sizeBytes: 10, modifiedNanoseconds: 0)
    }
}

/// What a reload may apply live, and what it must refuse (docs/configuration.md, "Reloading").
@Suite struct ConfigurationChangeTests {
    let files: TestFiles

    init() throws {
        self.files = try TestFiles()
    }

    func change(_ edit: (String) -> String, environment: [String: String] = [:]) throws -> ConfigurationChange {
        let old = try self.files.load(minimalYAML, checksFiles: false).configuration
        let new = try self.files.load(edit(minimalYAML), environment: environment, checksFiles: false).configuration
        return ConfigurationChange(from: old, to: new)
    }

    @Test("the same configuration changes nothing")
    func nothing() throws {
        let change = try self.change { $0 }
        #expect(change.restartOnly.isEmpty && change.live.isEmpty)
    }

    @Test("a route's template applies live and needs no new APNs senders")
    func routeTemplate() throws {
        let change = try self.change {
            $0.replacingOccurrences(of: "alert: \"{{text}}\"", with: "alert: \"new {{text}}\"")
        }
        #expect(change.restartOnly.isEmpty)
        #expect(!change.changesSenders)
    }

    @Test("a new route on a topic already consumed applies live")
    func newRouteSameTopic() throws {
        let change = try self.change {
            $0 + """
                  - name: second
                    input_topic: greetings
                    device_tokens: "{{token}}"
                    topic: com.example.app
                    payload: { aps: { alert: "second" } }

                """
        }
        #expect(change.restartOnly.isEmpty)
    }

    @Test("new credentials apply live with new APNs senders")
    func credentials() throws {
        let change = try self.change { $0.replacingOccurrences(of: "key_id: ABC123DEFG", with: "key_id: NEWKEY1234") }
        #expect(change.restartOnly.isEmpty)
        #expect(change.live == ["apns"])
        #expect(change.changesSenders)
    }

    @Test("connection settings and a new app apply live")
    func connectionsAndApps() throws {
        let change = try self.change {
            $0.replacingOccurrences(
                of: "    team_id: DEF123GHIJ\n", with: "    team_id: DEF123GHIJ\n  connections: 4\n"
            )
            .replacingOccurrences(
                of: "routes:",
                with: """
                    apps:
                      other:
                        auth: { type: token, key_file: "${KEY_FILE}", key_id: ABC123DEFG, team_id: DEF123GHIJ }
                    routes:
                    """)
        }
        #expect(change.restartOnly.isEmpty)
        #expect(change.live == ["apns", "apps.other"])
    }

    @Test("retry applies live without new APNs senders")
    func retry() throws {
        let change = try self.change {
            $0.replacingOccurrences(
                of: "    team_id: DEF123GHIJ\n", with: "    team_id: DEF123GHIJ\n  retry: { max_attempts: 2 }\n")
        }
        #expect(change.restartOnly.isEmpty)
        #expect(change.live == ["apns.retry"])
        #expect(!change.changesSenders)
    }

    @Test("the consumer group, the brokers and max_in_flight are restart-only, each named")
    func kafkaKeys() throws {
        let change = try self.change {
            $0.replacingOccurrences(
                of: "  bootstrap_servers: embedded\n",
                with: "  bootstrap_servers: broker:9092\n  group_id: other\n  max_in_flight: 5\n")
        }
        #expect(
            change.restartOnly.map(\.key) == ["kafka.bootstrap_servers", "kafka.group_id", "kafka.max_in_flight"])
    }

    @Test(
        "lanes' shares, lanes added and removed, and a route moving to another lane apply live; lanes turned on or off only at a restart"
    )
    func lanes() throws {
        let withLanes = { (share: Int, lane: String) in
            { (yaml: String) in
                yaml.replacingOccurrences(
                    of: "routes:\n",
                    with: "lanes:\n  urgent: { max_in_flight: \(share) }\n  bulk: { max_in_flight: 10 }\nroutes:\n"
                )
                .replacingOccurrences(
                    of: "    input_topic: greetings\n", with: "    input_topic: greetings\n    lane: \(lane)\n")
            }
        }
        let old = try self.files.load(withLanes(5, "urgent")(minimalYAML), checksFiles: false).configuration
        let resized = try self.files.load(withLanes(6, "urgent")(minimalYAML), checksFiles: false).configuration
        let reshared = ConfigurationChange(from: old, to: resized)
        #expect(reshared.restartOnly.isEmpty && reshared.live == ["lanes"] && !reshared.changesSenders)
        #expect(resized.laneBudgets.map(\.maxInFlight) == [old.laneBudgets[0].maxInFlight - 1, 6, 10])
        let oneLane = try self.files.load(
            minimalYAML.replacingOccurrences(of: "routes:\n", with: "lanes:\n  urgent: { max_in_flight: 5 }\nroutes:\n")
                .replacingOccurrences(
                    of: "    input_topic: greetings\n", with: "    input_topic: greetings\n    lane: urgent\n"),
            checksFiles: false
        ).configuration
        let removed = ConfigurationChange(from: old, to: oneLane)
        #expect(removed.restartOnly.isEmpty && removed.live == ["lanes"])
        #expect(ConfigurationChange(from: oneLane, to: old).live == ["lanes"])
        let noLanes = try self.files.load(minimalYAML, checksFiles: false).configuration
        #expect(
            ConfigurationChange(from: noLanes, to: oneLane).restartOnly.map(\.description) == [
                "lanes (lanes where there were none)"
            ])
        #expect(
            ConfigurationChange(from: oneLane, to: noLanes).restartOnly.map(\.description) == [
                "lanes (no lanes any more)"
            ])
        let moved = try self.files.load(withLanes(5, "bulk")(minimalYAML), checksFiles: false).configuration
        let change = ConfigurationChange(from: old, to: moved)
        #expect(change.restartOnly.isEmpty && !change.changesSenders)
    }

    @Test("a librdkafka property is named by its key, never its value")
    func propertyNamedNotValued() throws {
        let change = try self.change {
            $0.replacingOccurrences(
                of: "  bootstrap_servers: embedded\n",
                with: "  bootstrap_servers: embedded\n  properties: { sasl.password: Hunter2-secret }\n")
        }
        #expect(change.restartOnly.map(\.description) == ["kafka.properties.sasl.password"])
        #expect(!"\(change)".contains("Hunter2"))
    }

    @Test("a new input topic is restart-only, naming the topic")
    func inputTopics() throws {
        let change = try self.change {
            $0.replacingOccurrences(of: "input_topic: greetings", with: "input_topic: other")
        }
        #expect(change.restartOnly.map(\.key) == ["routes[].input_topic"])
        #expect(change.restartOnly.first?.detail == "new input topics: other; no longer consumed: greetings")
    }

    @Test("result topics, admin, logging and shutdown are restart-only")
    func otherSections() throws {
        let change = try self.change {
            $0 + """
                outcomes: { topic: other.outcomes }
                admin: { listen: 127.0.0.1:9999 }
                logging: { level: debug }
                shutdown: { drain_timeout: 5s }

                """
        }
        #expect(
            change.restartOnly.map(\.key) == [
                "outcomes.topic", "admin.listen", "logging.level", "shutdown.drain_timeout",
            ])
    }

    @Test("a binary app's feedback poller settings apply live, naming the app; so does its records' topic")
    func feedbackApp() throws {
        let app = """
            apps:
              legacy:
                protocol: binary
                auth: { type: certificate, cert_file: "${CA_FILE}", key_file: "${KEY_FILE}" }
                binary: { feedback: { topic: com.example.app, interval: INTERVAL } }
            routes:
            """
        let old = try self.files.load(
            minimalYAML.replacingOccurrences(of: "routes:", with: app.replacingOccurrences(of: "INTERVAL", with: "1h")),
            checksFiles: false
        ).configuration
        let new = try self.files.load(
            minimalYAML.replacingOccurrences(of: "routes:", with: app.replacingOccurrences(of: "INTERVAL", with: "2h")),
            checksFiles: false
        ).configuration
        let change = ConfigurationChange(from: old, to: new)
        #expect(change.restartOnly.isEmpty)
        #expect(change.feedback == ["apps.legacy"])
        let added = ConfigurationChange(
            from: try self.files.load(minimalYAML, checksFiles: false).configuration, to: new)
        #expect(added.restartOnly.isEmpty)
        #expect(added.feedback == ["apps.legacy"])
        let removed = ConfigurationChange(
            from: new, to: try self.files.load(minimalYAML, checksFiles: false).configuration)
        #expect(removed.feedback == ["apps.legacy"])
        #expect(ConfigurationChange(from: new, to: new).feedback.isEmpty)
        let otherTopic = try self.files.load(
            minimalYAML.replacingOccurrences(
                of: "routes:",
                with: app.replacingOccurrences(of: "INTERVAL", with: "2h").replacingOccurrences(
                    of: "com.example.app", with: "com.example.other")),
            checksFiles: false
        ).configuration
        #expect(ConfigurationChange(from: new, to: otherTopic).feedback == ["apps.legacy"])
    }
}
