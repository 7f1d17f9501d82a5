import APNSSimulator
import Foundation
import Kafka
import TestSupport
import TestWaiting
import Testing

@testable import Bridge

// A shutdown ends in bounded time whatever Kafka and APNs do (docs/operations.md, "Shutdown").

@Suite("Shutdown in bounded time", .serialized)
struct EndToEndShutdownTests {
    /// Before, the process never ended: the sends waiting for room in the full producer queue were cancelled by
    /// the drain timeout, returned at once from their wait and tried again, on both cores (118 CPU-seconds in 60 s).
    @Test(
        "SIGTERM with every broker down and a tiny producer queue: the process exits within drain_timeout plus the margin, using under a CPU-second; a restart after the outage loses nothing"
    )
    func sigtermDuringBrokerOutageEnds() async throws {
        var scenario = SimulatorScenario()
        scenario.latency = .milliseconds(5)
        try await withEndToEnd(scenario: scenario) { world in
            let count = 3000
            try await world.produce((0..<count).map { EndToEnd.alert([EndToEnd.token($0)]) })
            let path = try world.configuration(
                maxInFlight: 1000, logLevel: "warning", producerProperties: ["queue.buffering.max.messages": "200"])
            let log = world.directory.appendingPathComponent("outage.log")
            let bridge = try BridgeProcess.start(configurationPath: path, log: log)
            try #require(await world.simulator.waitForAnswers(300, timeout: .seconds(60)))
            try world.cluster.setBrokerDown(1)
            // The outcomes of what is in flight fill the producer's 200 places, and the line waits for room.
            try await Task.sleep(for: .seconds(2))
            #expect(
                world.simulator.statistics.requestsAnswered < count,
                "everything was sent before the outage: the test proves nothing")

            let signalled = ContinuousClock.now
            let cpuAtSignal = try #require(bridge.cpuSeconds(), "the bridge is not running")
            bridge.kill(signal: SIGTERM)
            let (status, cpuAtExit) = await bridge.waitForExitReadingCPU(timeout: .seconds(90))
            let took = ContinuousClock.now - signalled
            // The product's bound is drain_timeout (5 s here) + ShutdownSteps.margin (10 s), measured from when
            // the process heard the signal; the rest allows a slow, loaded host to deliver the signal and reap.
            let bound = Duration.seconds(5) + ShutdownSteps.margin + .seconds(10)
            #expect(status == 0, "exit status \(status) after \(took)")
            #expect(took < bound, "SIGTERM took \(took) to end the process")
            let cpu = cpuAtExit - cpuAtSignal
            #expect(cpu < 1, "the shutdown used \(cpu) CPU-seconds: something spins")
            let text = try String(contentsOf: log, encoding: .utf8)
            #expect(text.contains("Drain timeout"), "the operator's one line about the abandoned work")

            // After the outage a new instance delivers every event: what was unacknowledged was not committed.
            try world.cluster.setBrokerUp(1)
            let second = try BridgeProcess.start(
                configurationPath: path, log: world.directory.appendingPathComponent("after.log"))
            let results = try await world.results(timeout: .seconds(120)) { results in
                Set(results.outcomes.map(\.token)).count >= count
            }
            second.kill(signal: SIGTERM)
            #expect(await second.waitForExit() == 0)
            #expect(Set(results.outcomes.map(\.token)) == Set((0..<count).map { EndToEnd.token($0) }))
        }
    }
}

extension BridgeProcess {
    /// The CPU time the process used so far (user and system, from `/proc/<pid>/stat`); `nil` once it is gone.
    func cpuSeconds() -> Double? {
        let pid = self.process.processIdentifier
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
            let close = stat.lastIndex(of: ")")
        else { return nil }
        // After the command name in parentheses: state is field 3, utime and stime are fields 14 and 15.
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        guard fields.count > 12, let user = Double(fields[11]), let system = Double(fields[12]) else { return nil }
        return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
    }

    /// Waits for the process to exit (at most `timeout`, then kills it and returns -1), reading its CPU time every
    /// 20 ms; returns the exit status and the last CPU time read before it exited.
    func waitForExitReadingCPU(timeout: Duration) async -> (status: Int32, cpuSeconds: Double) {
        let deadline = ContinuousClock.now + timeout
        var cpu = 0.0
        while self.process.isRunning && ContinuousClock.now < deadline {
            if let now = self.cpuSeconds() { cpu = now }
            try? await Task.sleep(for: .milliseconds(20))
        }
        return (await self.waitForExit(), cpu)
    }
}
