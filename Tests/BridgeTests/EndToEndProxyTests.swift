import APNSSimulator
import Foundation
import TestSupport
import TestWaiting
import Testing

/// `pushbridge run` (the built executable, as a child process) with `apns.proxy` pointing at a real HTTP proxy
/// (Debian's tinyproxy, started by the test): a proxy that refuses the credentials halts the line with the reason and
/// loses nothing; a proxy that dies mid-stream does the same, and the line resumes with it.
@Suite(
    "End to end: pushbridge run through an HTTP proxy (tinyproxy)", .serialized,
    .enabled(if: TinyProxy.testsRun, Comment(rawValue: TinyProxy.missing)), .timeLimit(.minutes(3)))
struct EndToEndProxyTests {
    /// Waits until `log` holds `text` (at most `timeout`).
    func waitForLog(_ log: URL, _ text: String, timeout: Duration = .seconds(60)) async throws -> String {
        var output = ""
        _ = try await eventually(timeout: timeout, every: .milliseconds(100)) {
            output = (try? String(contentsOf: log, encoding: .utf8)) ?? ""
            return output.contains(text)
        }
        #expect(output.contains(text), "\(text) in the log: \(output.suffix(3000))")
        return output
    }

    @Test(
        "the proxy refuses the credentials: the line halts naming the proxy, nothing is sent or committed; once it takes them, every event is delivered"
    )
    func refusedCredentialsHaltThenResume() async throws {
        try await withEndToEnd { world in
            let count = 12
            var proxy = try await TinyProxy.start(
                connectPorts: [world.simulator.port], credentials: ("pushbridge", "another-password"))
            defer { proxy.stop() }
            let port = proxy.port
            let perPartition = try await world.produce((0..<count).map { EndToEnd.alert([EndToEnd.token($0)]) })
            let path = try world.configuration(
                logLevel: "info", proxy: "http://pushbridge:bridge-password@127.0.0.1:\(port)")
            let log = world.directory.appendingPathComponent("run.log")
            let bridge = try BridgeProcess.start(configurationPath: path, log: log)

            var output = try await self.waitForLog(log, "Line halted")
            #expect(output.contains("through the proxy http://****@127.0.0.1:\(port)"))
            #expect(
                output.contains("the proxy refused the credentials (401 Unauthorized)"), "tinyproxy's status for them")
            #expect(world.simulator.statistics.requestsReceived == 0)
            let halted = try await world.results(timeout: .seconds(2), expectComplete: false) { _ in false }
            #expect(halted.outcomes.isEmpty, "halted, not failed")
            #expect(try await world.committed() != perPartition)

            // The proxy now takes the bridge's credentials, on the same port: the line resumes by itself.
            proxy.stop()
            proxy = try await TinyProxy.start(
                connectPorts: [world.simulator.port], credentials: ("pushbridge", "bridge-password"), port: port)
            let results = try await world.results(timeout: .seconds(90)) { $0.outcomes.count >= count }
            #expect(results.outcomes.count == count)
            #expect(results.outcomes.allSatisfy { $0.status == "delivered" })
            #expect(try await eventually(timeout: .seconds(30)) { (try? await world.committed()) == perPartition })
            bridge.kill(signal: SIGTERM)
            #expect(await bridge.waitForExit() == 0)
            output = (try? String(contentsOf: log, encoding: .utf8)) ?? ""
            #expect(output.contains("Line resumed"))
            #expect(!output.contains("bridge-password") && !output.contains("another-password"))
        }
    }

    @Test(
        "the proxy dies between two batches: every tunnel closes, the line halts until it is back, and every event is delivered"
    )
    func proxyDiesMidStream() async throws {
        try await withEndToEnd { world in
            let batch = 15
            var proxy = try await TinyProxy.start(connectPorts: [world.simulator.port])
            defer { proxy.stop() }
            let port = proxy.port
            var perPartition = try await world.produce((0..<batch).map { EndToEnd.alert([EndToEnd.token($0)]) })
            let path = try world.configuration(logLevel: "info", proxy: "http://127.0.0.1:\(port)")
            let log = world.directory.appendingPathComponent("run.log")
            let bridge = try BridgeProcess.start(configurationPath: path, log: log)
            _ = try await world.results(timeout: .seconds(90)) { $0.outcomes.count >= batch }

            proxy.stop()  // SIGKILL: the tunnels of the bridge's connections close
            let second = try await world.produce((batch..<2 * batch).map { EndToEnd.alert([EndToEnd.token($0)]) })
            perPartition.merge(second) { $0 + $1 }
            let output = try await self.waitForLog(log, "Line halted")
            #expect(output.contains("through the proxy http://127.0.0.1:\(port)"))
            #expect(output.contains("cannot connect to the proxy"))

            proxy = try await TinyProxy.start(connectPorts: [world.simulator.port], port: port)
            let results = try await world.results(timeout: .seconds(90)) { $0.outcomes.count >= 2 * batch }
            #expect(results.notificationIDs.count == 2 * batch)
            #expect(results.outcomes.allSatisfy { $0.status == "delivered" }, "none failed: halted, then resent")
            #expect(try await eventually(timeout: .seconds(30)) { (try? await world.committed()) == perPartition })
            bridge.kill(signal: SIGTERM)
            #expect(await bridge.waitForExit() == 0)
        }
    }
}
