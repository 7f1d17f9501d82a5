import APNSCore
import APNSSimulator
import Foundation
import Testing

// `latency_jitter_ms` and `receive_log`: random answer delays, seeded, and the order requests arrived in.

extension SimulatorEngineTests {
    func delays(_ scenario: SimulatorScenario, count: Int = 200) -> [Duration] {
        let engine = SimulatorEngine(scenario: scenario, clock: self.clock)
        let auth = self.token()
        return (0..<count).compactMap { _ in
            if case .respond(_, let delay) = engine.handle(self.request(authorization: auth)) { return delay }
            return nil
        }
    }

    @Test("with latency_jitter_ms every answer waits latency plus 0...jitter ms, spread over the range")
    func jitterRange() {
        var scenario = self.scenario()
        scenario.latency = .milliseconds(5)
        scenario.latencyJitter = .milliseconds(20)
        let delays = self.delays(scenario)
        #expect(delays.count == 200)
        #expect(delays.allSatisfy { $0 >= .milliseconds(5) && $0 <= .milliseconds(25) })
        #expect(Set(delays).count > 10, "the delays are not random")
        #expect(delays.contains { $0 < .milliseconds(10) } && delays.contains { $0 > .milliseconds(20) })
    }

    @Test("the jitter is seeded: the same seed gives the same delays, another seed others")
    func jitterIsSeeded() {
        var scenario = self.scenario()
        scenario.latencyJitter = .milliseconds(50)
        scenario.seed = 9
        let first = self.delays(scenario)
        #expect(self.delays(scenario) == first)
        scenario.seed = 10
        #expect(self.delays(scenario) != first)
    }

    @Test("without jitter every answer waits exactly the latency")
    func noJitter() {
        var scenario = self.scenario()
        scenario.latency = .milliseconds(7)
        #expect(Set(self.delays(scenario, count: 20)) == [.milliseconds(7)])
    }

    @Test("adding jitter leaves the seeded faults on the same requests")
    func jitterKeepsFaults() {
        func statuses(jitter: Duration) -> [Int] {
            var scenario = self.scenario()
            scenario.serviceUnavailableRate = 0.3
            scenario.latencyJitter = jitter
            let engine = SimulatorEngine(scenario: scenario, clock: self.clock)
            let auth = self.token()
            return (0..<100).compactMap { _ in self.answer(engine.handle(self.request(authorization: auth)))?.status }
        }
        let plain = statuses(jitter: .zero)
        #expect(plain.contains(503))
        #expect(statuses(jitter: .milliseconds(30)) == plain)
    }

    @Test("receive_log keeps the first requests in arrival order with their token, apns-id and status")
    func receiveLog() throws {
        var scenario = self.scenario()
        scenario.receiveLogLimit = 3
        scenario.badTokens = [Fixtures.deviceToken(2)]
        let engine = SimulatorEngine(scenario: scenario, clock: self.clock)
        let auth = self.token()
        let notifications = (1...5).map { Fixtures.notification(token: Fixtures.deviceToken($0)) }
        for notification in notifications { _ = engine.handle(self.request(notification, authorization: auth)) }
        let log = engine.receivedRequests
        #expect(log.map(\.apnsID) == notifications.prefix(3).map(\.apnsID))
        #expect(log.map(\.deviceToken) == notifications.prefix(3).map(\.deviceToken))
        #expect(log.map(\.status) == [200, 400, 200])
        #expect(engine.statistics.requestsReceived == 5, "requests past the limit are still counted")
        #expect(SimulatorEngine(scenario: self.scenario(), clock: self.clock).receivedRequests.isEmpty)
    }
}

extension SimulatorScenarioTests {
    @Test("latency_jitter_ms and receive_log are read from a scenario file")
    func jitterAndReceiveLog() throws {
        let scenario = try SimulatorScenario.parse(
            yaml: "latency_ms: 3\nlatency_jitter_ms: 40\nreceive_log: 5000\nfaults: {seed: 11, rate_503: 0.2}\n",
            file: "s.yaml")
        #expect(scenario.latency == .milliseconds(3))
        #expect(scenario.latencyJitter == .milliseconds(40))
        #expect(scenario.receiveLogLimit == 5000)
        #expect(scenario.seed == 11)
        let defaults = try SimulatorScenario.parse(yaml: "topics: [a]\n", file: "s.yaml")
        #expect(defaults.latencyJitter == .zero)
        #expect(defaults.receiveLogLimit == 0)
    }

    @Test(
        "a wrong latency_jitter_ms or receive_log names the key, the line and the allowed range",
        arguments: [
            ("latency_jitter_ms: -1", "latency_jitter_ms", "0...600000"),
            ("latency_jitter_ms: 600001", "latency_jitter_ms", "0...600000"),
            ("latency_jitter_ms: 99999999999999999999999", "latency_jitter_ms", "expected an integer"),
            ("latency_jitter_ms: 2.5", "latency_jitter_ms", "expected an integer"),
            ("latency_jitter_ms: soon", "latency_jitter_ms", "expected an integer"),
            ("latency_jitter_ms: [1, 2]", "latency_jitter_ms", "expected an integer"),
            ("latency_jitter_ms: {ms: 1}", "latency_jitter_ms", "expected an integer"),
            ("latency_jitter_ms:", "latency_jitter_ms", "expected an integer"),
            ("receive_log: -5", "receive_log", "0...1000000"),
            ("receive_log: 1000001", "receive_log", "0...1000000"),
            ("receive_log: true", "receive_log", "expected an integer"),
            ("receive_log: [all]", "receive_log", "expected an integer"),
            ("latency_jiter_ms: 5", "latency_jiter_ms", "latency_jitter_ms"),
        ])
    func jitterAndReceiveLogErrors(line: String, keyPath: String, words: String) {
        let error = #expect(throws: ScenarioError.self) {
            try SimulatorScenario.parse(yaml: "topics: [a]\n" + line + "\n", file: "s.yaml")
        }
        #expect(error?.keyPath == keyPath)
        #expect(error?.line == 2)
        #expect(error?.description.contains(words) == true, "\(String(describing: error))")
    }
}
