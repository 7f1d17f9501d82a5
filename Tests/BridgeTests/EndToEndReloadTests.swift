import APNSSimulator
import Crypto
import Foundation
import HTTP2
import Synchronization
import TestSupport
import TestWaiting
import Testing
import Waiting

// Reloading the configuration of a running `pushbridge run` (docs/configuration.md, "Reloading"), as an operator does
// it: files replaced the way Kubernetes replaces them (a new file renamed over the old), or SIGHUP.

@Suite("End to end: reloading the configuration", .serialized)
struct EndToEndReloadTests {
    @Test(
        "rotating the .p8 key while events flow: no halt, no outcome lost or repeated, no rebalance; APNs then accepts only the new key",
        .timeLimit(.minutes(5)))
    func keyRotationWhileEventsFlow() async throws {
        var scenario = SimulatorScenario()
        scenario.latency = .milliseconds(5)
        try await withEndToEnd(scenario: scenario) { world in
            let running = try await RunningBridge.start(world, name: "rotation")
            // Events flow for the whole test.
            let produced = ProducedCount.flowing(into: world)
            defer { produced.stop() }
            try #require(
                await world.simulator.waitForStatistics(timeout: .seconds(60)) { $0.byStatus[200, default: 0] >= 50 })

            // The rotation as docs/operations.md describes it: the new key is created at Apple (so APNs trusts both),
            // its file is added beside the old one, then the configuration names it.
            let connectionsBefore = world.simulator.transportStatistics.connectionsAccepted
            let newKey = P256.Signing.PrivateKey()
            world.simulator.trust(.init(keyID: "NEWKEY0002", teamID: EndToEnd.teamID, publicKey: newKey.publicKey))
            try world.write(key: newKey, to: "AuthKey_NEWKEY0002.p8")
            try world.configuration(
                keyFile: "AuthKey_NEWKEY0002.p8", logLevel: "info", adminListen: "127.0.0.1:\(running.port)",
                name: "rotation-next"
            ).replacingFile(
                running.configurationPath, edit: { $0.replacingOccurrences(of: EndToEnd.keyID, with: "NEWKEY0002") })
            try await running.waitForLog("Configuration reloaded")
            // The old sender is shut down once its last request was answered: from here on the old key is refused,
            // and any request still signed with it would halt the line.
            try await running.waitForLog("Previous APNs sender shut down after its last answer")
            world.simulator.revoke(keyID: EndToEnd.keyID)
            let atRevocation = produced.count
            try await produced.waitFor(atRevocation + 100)
            let total = try await produced.finish()

            let results = try await world.results(timeout: .seconds(120)) { $0.outcomes.count >= total }
            #expect(try await running.reloads("applied") == 1)
            // Before the stop, whose revocation is the member leaving the group.
            let logs = try running.logs()
            try await running.stop()
            results.expectEachDeliveredOnce(total)
            let statistics = world.simulator.statistics
            #expect(statistics.tokensDeliveredMoreThanOnce.isEmpty)
            #expect(statistics.byStatus[403] == nil, "APNs refused a provider token: \(statistics.byStatus)")
            #expect(!logs.contains("Line halted"))
            // APNs ties a connection to the key ID it first saw: the new key went out on new connections.
            #expect(world.simulator.transportStatistics.connectionsAccepted > connectionsBefore)
            // One assignment at start, none after: the member never left the group (the generation did not change).
            #expect(logs.count(of: "Partitions assigned") == running.assignmentsAtStart)
            #expect(!logs.contains("Partitions revoked"))
            #expect(logs.count(of: "Configuration reloaded") == 1)
        }
    }

    @Test(
        "renewing the client certificate in place while events flow: new connections present the new one, the old ones close after their last answer; no outcome lost or repeated, no rebalance",
        .timeLimit(.minutes(5)))
    func clientCertificateRenewalWhileEventsFlow() async throws {
        // The app's certificates come from a CA of their own, which the simulator trusts (certificate-based
        // authentication); the bridge's `ca_file` still names the simulator's server CA.
        let clients = try TestTLS.generate(name: "PushBridge Clients", clientCommonName: "app-2026")
        defer { clients.remove() }
        var scenario = SimulatorScenario()
        scenario.latency = .milliseconds(5)
        scenario.clientCAFile = clients.caCertificatePath
        try await withEndToEnd(scenario: scenario) { world in
            // The files a Secret mounts: the configuration names them, and they are replaced in place.
            let certificateFile = world.directory.appendingPathComponent("app.pem").path
            let keyFile = world.directory.appendingPathComponent("app-key.pem").path
            try FileManager.default.copyItem(atPath: clients.clientCertificatePath, toPath: certificateFile)
            try FileManager.default.copyItem(atPath: clients.clientKeyPath, toPath: keyFile)
            let running = try await RunningBridge.start(world, name: "renewal") {
                $0.replacingAuth(with: "{ type: certificate, cert_file: \(certificateFile), key_file: \(keyFile) }")
            }
            let old = try TestTLS.simulatorFingerprint(ofCertificateAt: certificateFile)
            let produced = ProducedCount.flowing(into: world)
            defer { produced.stop() }
            try #require(
                await world.simulator.waitForStatistics(timeout: .seconds(60)) {
                    $0.byClientCertificate[old, default: 0] >= 50
                })

            // Renewed: a new certificate with a new key from the same CA, each file renamed over the old one.
            let connectionsBefore = world.simulator.transportStatistics.connectionsAccepted
            let renewed = try clients.issueClientCertificate(commonName: "app-2027")
            let new = try TestTLS.simulatorFingerprint(ofCertificateAt: renewed.certificatePath)
            try renewed.keyPath.replacingFile(keyFile)
            try renewed.certificatePath.replacingFile(certificateFile)
            try await running.waitForLog("Configuration reloaded")
            try await running.waitForLog("Previous APNs sender shut down after its last answer")
            // From here on the old certificate's connections are closed: every request presents the new one.
            let oldRequests = world.simulator.statistics.byClientCertificate[old, default: 0]
            let atSwap = produced.count
            try await produced.waitFor(atSwap + 100)
            let total = try await produced.finish()

            let results = try await world.results(timeout: .seconds(120)) { $0.outcomes.count >= total }
            #expect(try await running.reloads("applied") == 1)
            let logs = try running.logs()
            try await running.stop()
            results.expectEachDeliveredOnce(total)
            let statistics = world.simulator.statistics
            #expect(statistics.byClientCertificate[old] == oldRequests, "a request presented the old certificate")
            // The events produced after the swap, but for the batch of 10 in progress then: its events may have gone
            // out (through the old sender) before Kafka's acknowledgements reached the producing task.
            #expect(statistics.byClientCertificate[new, default: 0] >= total - atSwap - 10)
            #expect(statistics.byClientCertificate.keys.sorted() == [old, new].sorted())
            #expect(statistics.tokensDeliveredMoreThanOnce.isEmpty)
            #expect(statistics.byStatus.keys.sorted() == [200], "\(statistics.byStatus)")
            #expect(world.simulator.transportStatistics.connectionsAccepted > connectionsBefore)
            #expect(!logs.contains("Line halted"))
            #expect(logs.count(of: "Partitions assigned") == running.assignmentsAtStart)
            #expect(!logs.contains("Partitions revoked"))
        }
    }

    @Test(
        "SIGHUP with a larger share for a full lane: more of its events go out at once, without a restart or a rebalance",
        .timeLimit(.minutes(5)))
    func laneShareGrowsLive() async throws {
        var scenario = SimulatorScenario()
        scenario.latency = .milliseconds(300)
        try await withEndToEnd(scenario: scenario) { world in
            let lanes = { (share: Int) in
                { (yaml: String) in
                    yaml.replacingOccurrences(
                        of: "routes:\n", with: "lanes:\n  bulk: { max_in_flight: \(share) }\nroutes:\n"
                    ).replacingOccurrences(
                        of: "    input_topic: \(world.inputTopic)\n",
                        with: "    input_topic: \(world.inputTopic)\n    lane: bulk\n")
                }
            }
            let running = try await RunningBridge.start(world, name: "lanes", edit: lanes(2))
            let count = 120
            try await world.produce((0..<count).map { EndToEnd.alert([EndToEnd.token($0)]) })
            // At most 2 at once: APNs answers each after 300 ms.
            try await waitUntil(timeout: .seconds(60), every: .milliseconds(100)) {
                (try? await running.bulkInFlight()) == 2
            }
            #expect(world.simulator.statistics.requestsReceived < count / 2, "the backlog was gone before the reload")

            let edited = try String(contentsOfFile: running.configurationPath, encoding: .utf8)
                .replacingOccurrences(of: "bulk: { max_in_flight: 2 }", with: "bulk: { max_in_flight: 40 }")
            try Data(edited.utf8).write(to: URL(fileURLWithPath: running.configurationPath))
            running.bridge.kill(signal: SIGHUP)
            try await running.waitForLog("Configuration reloaded")
            #expect(try running.logs().contains("reload.changed=lanes"))
            try await waitUntil(timeout: .seconds(60), every: .milliseconds(100)) {
                (try? await running.bulkInFlight()) ?? 0 > 2
            }

            let results = try await world.results(timeout: .seconds(120)) { $0.outcomes.count >= count }
            let logs = try running.logs()
            try await running.stop()
            results.expectEachDeliveredOnce(count)
            #expect(logs.count(of: "Partitions assigned") == running.assignmentsAtStart)
            #expect(!logs.contains("Partitions revoked"))
        }
    }

    @Test(
        "a configuration that does not load, and one that changes the consumer group, are refused; the bridge keeps delivering",
        .timeLimit(.minutes(5)))
    func refusedConfigurationsKeepTheOldOne() async throws {
        try await withEndToEnd { world in
            let running = try await RunningBridge.start(world, name: "refusals")
            try await world.produce((0..<20).map { EndToEnd.alert([EndToEnd.token($0)]) })
            _ = try await world.results { $0.outcomes.count >= 20 }

            // A typo in a route: the file does not load.
            _ = try world.configuration(logLevel: "info", adminListen: "127.0.0.1:\(running.port)", name: "broken")
                .replacingFile(
                    running.configurationPath, edit: { $0.replacingOccurrences(of: "payload:", with: "paylod:") })
            try await running.waitForLog("Configuration not reloaded: it does not load")
            #expect(try running.logs().contains("unknown key (did you mean payload?)"))
            #expect(try await running.reloads("failed") == 1)
            try await world.produce((20..<40).map { EndToEnd.alert([EndToEnd.token($0)]) })
            _ = try await world.results { $0.outcomes.count >= 40 }

            // A valid file that moves the bridge to another consumer group: that applies only at a restart.
            _ = try world.configuration(
                group: "another-group", logLevel: "info", adminListen: "127.0.0.1:\(running.port)", name: "regroup"
            ).replacingFile(running.configurationPath)
            try await running.waitForLog("Configuration not reloaded: a key changed that applies only at a restart")
            #expect(try running.logs().contains("config.keys=kafka.group_id"))
            #expect(try await running.reloads("refused") == 1)
            try await world.produce((40..<60).map { EndToEnd.alert([EndToEnd.token($0)]) })
            let results = try await world.results { $0.outcomes.count >= 60 }

            #expect(try await httpGet(port: running.port, path: "/readyz").0 == 200)
            let logs = try await running.stop()
            #expect(results.outcomes.count == 60)
            #expect(results.outcomes.allSatisfy { $0.status == "delivered" })
            #expect(!logs.contains("Configuration reloaded"))
            // Still the old group: it committed everything.
            #expect(try await world.committed().values.reduce(0, +) == 60)
        }
    }

    @Test("SIGHUP with a new route: the next events use it", .timeLimit(.minutes(5)))
    func sighupAddsARoute() async throws {
        try await withEndToEnd { world in
            let running = try await RunningBridge.start(world, name: "sighup")
            let greeting = #"{"kind":"greeting","text":"hi","tokens":["TOKEN"]}"#
            try await world.produce([greeting.replacingOccurrences(of: "TOKEN", with: EndToEnd.token(1))])
            try await world.produce([EndToEnd.alert([EndToEnd.token(2)])])
            _ = try await world.results { $0.outcomes.count >= 1 }

            // The running file with a second route on the same input topic, written before `outcomes:`.
            let greetings = """
                  - name: greetings
                    input_topic: \(world.inputTopic)
                    match: { kind: greeting }
                    device_tokens: "{{tokens}}"
                    topic: com.example.app
                    payload:
                      aps:
                        alert: "greeting: {{text}}"

                """
            try world.configuration(logLevel: "info", adminListen: "127.0.0.1:\(running.port)", name: "sighup-next")
                .replacingFile(
                    running.configurationPath,
                    edit: { $0.replacingOccurrences(of: "outcomes:", with: greetings + "outcomes:") })
            running.bridge.kill(signal: SIGHUP)
            try await running.waitForLog("Configuration reloaded")
            #expect(try running.logs().contains("reload.trigger=signal"))

            try await world.produce(
                (3..<13).map { greeting.replacingOccurrences(of: "TOKEN", with: EndToEnd.token($0)) })
            let results = try await world.results { $0.outcomes.count >= 11 }
            let logs = try running.logs()
            try await running.stop()
            let greeted = results.outcomes.filter { $0.json["route"] == "greetings" }
            #expect(Set(greeted.map(\.token)) == Set((3..<13).map { EndToEnd.token($0) }))
            #expect(
                !results.outcomes.contains { $0.token == EndToEnd.token(1) }, "a greeting before the reload was sent")
            #expect(logs.count(of: "Partitions assigned") == running.assignmentsAtStart)
            #expect(world.simulator.statistics.byStatus[200] == 11)
        }
    }
}

extension EndToEndReloadTests {
    /// Before its reloader traps SIGHUP, a starting bridge must not die of one (its default action). The child's
    /// output goes to a pipe the test filled, so its first log line blocks it at a point of its start the test can
    /// see (a thread waiting in `pipe_write`); the SIGHUP arrives there.
    @Test("SIGHUP while the bridge starts is ignored: it goes on starting, then runs", .timeLimit(.minutes(3)))
    func sighupDuringStart() async throws {
        try await withEndToEnd { world in
            let port = try freeLoopbackPort()
            let path = try world.configuration(
                logLevel: "info", adminListen: "127.0.0.1:\(port)", name: "sighup-start")
            let output = try FullPipe()
            let bridge = try BridgeProcess.start(configurationPath: path, output: output.writer)
            let process = bridge.process
            try? output.closeWriter()
            defer { if process.isRunning { bridge.kill(signal: SIGKILL) } }

            // Blocked writing its first line, before it runs its services.
            try await waitUntil(timeout: .seconds(60), every: .milliseconds(100)) {
                !process.isRunning || Self.threadsWaitingInPipeWrite(process.processIdentifier)
            }
            #expect(process.isRunning)
            bridge.kill(signal: SIGHUP)
            // A signal whose action is to end the process ends it before the process runs again; only then is the
            // pipe read.
            _ = try await eventually(timeout: .seconds(10), every: .milliseconds(20)) {
                !process.isRunning || Self.signalPending(process.processIdentifier, SIGHUP) == false
            }
            let collected = output.startReading()
            // Printed once the start goes on; the pipe ends first when the SIGHUP ended the bridge.
            let printed = await collected.wait(timeout: .seconds(60)) {
                $0.contains("Configuration reloads on SIGHUP") || !process.isRunning
            }
            #expect(printed != nil)
            #expect(process.isRunning, "the SIGHUP during the start ended the bridge")
            bridge.kill(signal: SIGTERM)
            #expect(await bridge.waitForExit() == 0)
            await collected.waitForEnd(timeout: .seconds(10))
            let logs = collected.printed
            #expect(logs.contains("Configuration reloads on SIGHUP"))
            #expect(!logs.contains("Configuration reloaded"), "the early SIGHUP was not a reload request")
        }
    }

    /// Whether a thread of `pid` sleeps in the kernel's pipe write.
    static func threadsWaitingInPipeWrite(_ pid: Int32) -> Bool {
        let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task")) ?? []
        return tasks.contains { task in
            // `pipe_write`, or `anon_pipe_write` on newer kernels.
            (try? String(contentsOfFile: "/proc/\(pid)/task/\(task)/wchan", encoding: .utf8))?.hasSuffix("pipe_write")
                == true
        }
    }

    /// Whether `signal` is pending for the process `pid` (`ShdPnd` in `/proc/PID/status`); `nil` when it is gone.
    static func signalPending(_ pid: Int32, _ signal: Int32) -> Bool? {
        guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
            let line = status.split(separator: "\n").first(where: { $0.hasPrefix("ShdPnd:") }),
            let mask = UInt64(line.dropFirst("ShdPnd:".count).trimmingCharacters(in: .whitespaces), radix: 16)
        else { return nil }
        return mask & (1 << UInt64(signal - 1)) != 0
    }
}

/// A pipe filled to its capacity, so that whoever writes to it next blocks until ``startReading()`` drains it.
private final class FullPipe: Sendable {
    let pipe = Pipe()
    var writer: FileHandle { self.pipe.fileHandleForWriting }

    init() throws {
        let fd = self.pipe.fileHandleForWriting.fileDescriptor
        // F_GETPIPE_SZ (Linux's F_LINUX_SPECIFIC_BASE + 8), which Glibc exposes only with _GNU_SOURCE.
        let capacity = fcntl(fd, 1032)
        guard capacity > 0 else { throw TimedOut(what: "the pipe's capacity") }
        let filler = [UInt8](repeating: UInt8(ascii: "\n"), count: Int(capacity))
        let written = filler.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        guard written == capacity else { throw TimedOut(what: "filling the pipe") }
    }

    /// Closes this process's copy of the write end (the child keeps its own).
    func closeWriter() throws { try self.pipe.fileHandleForWriting.close() }

    /// Reads what the child writes from now on, beginning with the filler.
    func startReading() -> ProcessOutput { ProcessOutput(reading: self.pipe) }
}

/// `pushbridge run` as a child process with its configuration file, logs at info level and an admin port.
private struct RunningBridge {
    let bridge: BridgeProcess
    let configurationPath: String
    let log: URL
    let port: Int
    /// `Partitions assigned` lines once it consumed: the consumer's and the pipeline's, for the first assignment.
    let assignmentsAtStart: Int

    /// Starts it on `world.configuration(...)`, changed by `edit` first.
    static func start(_ world: EndToEnd, name: String, edit: (String) -> String = { $0 }) async throws
        -> RunningBridge
    {
        let port = try freeLoopbackPort()
        let path = try world.configuration(logLevel: "info", adminListen: "127.0.0.1:\(port)", name: name)
        try Data(edit(try String(contentsOfFile: path, encoding: .utf8)).utf8).write(to: URL(fileURLWithPath: path))
        let log = world.directory.appendingPathComponent("\(name).log")
        let bridge = try BridgeProcess.start(configurationPath: path, log: log)
        var running = RunningBridge(
            bridge: bridge, configurationPath: path, log: log, port: port, assignmentsAtStart: 0)
        try await running.waitForLog("Configuration reloads on SIGHUP")
        // The consumer's line and the pipeline's for the one assignment of the group's first generation.
        try await bridge.waitForOutput("the first assignment's two lines") {
            $0.count(of: "Partitions assigned") >= 2
        }
        running = RunningBridge(
            bridge: bridge, configurationPath: path, log: log, port: port,
            assignmentsAtStart: try running.logs().count(of: "Partitions assigned"))
        return running
    }

    func logs() throws -> String { try String(contentsOf: self.log, encoding: .utf8) }

    func waitForLog(_ text: String) async throws {
        try await self.bridge.waitForOutput(containing: text)
    }

    /// `pushbridge_config_reloads_total{result}` on `/metrics`.
    func reloads(_ result: String) async throws -> Int? {
        let (_, metrics) = try await httpGet(port: self.port, path: "/metrics")
        let prefix = "pushbridge_config_reloads_total{result=\"\(result)\"} "
        return metrics.split(separator: "\n").first { $0.hasPrefix(prefix) }.flatMap {
            Int(Double($0.dropFirst(prefix.count)) ?? -1)
        }
    }

    /// `pushbridge_in_flight{lane="bulk"}` on `/metrics`.
    func bulkInFlight() async throws -> Double {
        let (_, metrics) = try await httpGet(port: self.port, path: "/metrics")
        let prefix = "pushbridge_in_flight{lane=\"bulk\"} "
        return metrics.split(separator: "\n").first { $0.hasPrefix(prefix) }.flatMap {
            Double($0.dropFirst(prefix.count))
        } ?? -1
    }

    /// Stops it with SIGTERM (it must exit 0) and returns its logs.
    @discardableResult
    func stop() async throws -> String {
        self.bridge.kill(signal: SIGTERM)
        #expect(await self.bridge.waitForExit() == 0)
        return try self.logs()
    }
}

/// How many events the producing task produced (Kafka acknowledged them), and whether it should stop.
private final class ProducedCount: Sendable {
    private let state = AsyncCondition((count: 0, stopped: false))
    private let task = Mutex<Task<Void, any Error>?>(nil)
    func add(_ count: Int) { self.state.withLock { $0.count += count } }
    var count: Int { self.state.withLock { $0.count } }
    func stop() { self.state.withLock { $0.stopped = true } }
    var stopped: Bool { self.state.withLock { $0.stopped } }
    /// Waits until `count` events were produced.
    func waitFor(_ count: Int) async throws {
        try await waitUntil("\(count) events produced", self.state) { $0.count >= count }
    }

    /// Events flowing into `world`'s input topic until ``finish()``: 10 every 100 ms, each to a device of its own.
    static func flowing(into world: EndToEnd) -> ProducedCount {
        let produced = ProducedCount()
        produced.task.withLock {
            $0 = Task {
                while !produced.stopped {
                    let numbers = produced.count..<(produced.count + 10)
                    try await world.produce(numbers.map { EndToEnd.alert([EndToEnd.token($0)]) })
                    produced.add(numbers.count)
                    try await Task.sleep(for: .milliseconds(100))
                }
            }
        }
        return produced
    }

    /// Stops the flow; returns how many events it produced.
    func finish() async throws -> Int {
        self.stop()
        try await self.task.withLock { $0 }?.value
        return self.count
    }
}

extension Results {
    /// Every one of `total` events has exactly one outcome, and it is `delivered`.
    fileprivate func expectEachDeliveredOnce(_ total: Int, sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(self.outcomes.count == total, "outcomes lost or repeated", sourceLocation: sourceLocation)
        #expect(Set(self.outcomes.map(\.notificationID)).count == total, sourceLocation: sourceLocation)
        #expect(self.outcomes.allSatisfy { $0.status == "delivered" }, sourceLocation: sourceLocation)
    }
}

extension String {
    /// Renames the file at this path (edited by `edit` first) over `path` in one step, as Kubernetes replaces a
    /// mounted file: a reader sees the old file or the new one, never half of it. Returns `path`.
    @discardableResult
    fileprivate func replacingFile(_ path: String, edit: (String) -> String = { $0 }) throws -> String {
        let text = edit(try String(contentsOfFile: self, encoding: .utf8))
        try Data(text.utf8).write(to: URL(fileURLWithPath: self))
        guard rename(self, path) == 0 else { throw TimedOut(what: "the rename of \(self)") }
        return path
    }

    fileprivate func count(of text: String) -> Int { self.components(separatedBy: text).count - 1 }

    /// This configuration with its `apns.auth` block replaced by `auth` (a YAML flow mapping).
    fileprivate func replacingAuth(with auth: String) -> String {
        self.replacingOccurrences(
            of: #"  auth:\n(    .*\n)+"#, with: "  auth: \(auth)\n", options: .regularExpression)
    }
}
