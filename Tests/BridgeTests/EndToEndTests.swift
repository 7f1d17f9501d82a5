import APNSSimulator
import Crypto
import Foundation
import Kafka
import PipelineTestSupport
import TestSupport
import TestWaiting
import Testing

@testable import Bridge
@testable import BridgeCore

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

// `pushbridge run` against librdkafka's mock cluster and the APNs simulator over TLS + HTTP/2 (docs/data-contract.md, docs/operations.md "Guarantees").

@Suite("End to end", .serialized)
struct EndToEndTests {
    @Test(
        "every event is accounted for exactly as docs/data-contract.md says, records match their schemas, commits reach the end"
    )
    func accounting() async throws {
        let accounting = AccountingScenario()
        try await withEndToEnd(scenario: accounting.simulatorScenario) { world in
            let perPartition = try await world.produce(accounting.events)
            let path = try world.configuration()

            try await world.withBridge(configurationPath: path) { _ in
                _ = try await world.results(until: accounting.isComplete)
            }

            let results = try await world.results(until: accounting.isComplete)
            try await accounting.check(results, world: world)
            let committed = try await world.committed()
            #expect(committed == perPartition)
        }
    }

    @Test(
        "wrong credentials halt the line: no outcomes, nothing committed, /readyz 503; fixed, everything is delivered")
    func wrongCredentials() async throws {
        try await withEndToEnd { world in
            let count = 12
            let perPartition = try await world.produce((0..<count).map { EndToEnd.alert([EndToEnd.token($0)]) })
            try world.write(key: P256.Signing.PrivateKey(), to: "Wrong.p8")
            let wrong = try world.configuration(keyFile: "Wrong.p8")

            try await world.withBridge(configurationPath: wrong) { started in
                try #require(await started.pipeline.gate.waitUntilHalted(deadline: .now + .seconds(30)) != nil)
                let (status, body) = try await httpGet(port: started.adminPort, path: "/readyz")
                #expect(status == 503)
                #expect(body.contains("InvalidProviderToken"))
                try await Task.sleep(for: .milliseconds(500))
            }
            let afterHalt = try await world.results(timeout: .seconds(5), expectComplete: false) { _ in false }
            #expect(afterHalt.outcomes.isEmpty)
            #expect(try await world.committed().isEmpty)

            let fixed = try world.configuration()
            try await world.withBridge(configurationPath: fixed) { started in
                _ = try await world.results { $0.outcomes.count >= count }
                #expect(started.pipeline.readiness == .ready)
            }
            let results = try await world.results { $0.outcomes.count >= count }
            #expect(results.outcomes.allSatisfy { $0.status == "delivered" })
            #expect(results.notificationIDs.count == count)
            #expect(try await world.committed() == perPartition)
        }
    }
}

/// The accounting test's events and what docs/data-contract.md says must become of each: delivered, rejected (by APNs and
/// locally, with invalid-token records), expired, dead-lettered and unmatched events. Shared by the mock-cluster
/// lane and the real-broker lane (RealBrokerEndToEndTests).
struct AccountingScenario: Sendable {
    static let unregistered = EndToEnd.token(0xdead)
    static let bad = EndToEnd.token(0xbad)

    var events: [String] = []
    /// status -> count
    var expectedOutcomes: [String: Int] = [:]
    var expectedDeadLetters = 0
    var expectedInvalid = 0
    /// Requests that reach the simulator: the delivered ones and the ones APNs rejects.
    var expectedRequests = 0

    /// `count` events, eight kinds in turn.
    init(count: Int = 40) {
        for index in 0..<count {
            switch index % 8 {
            case 0:
                self.events.append(EndToEnd.alert([EndToEnd.token(index), EndToEnd.token(1000 + index)]))
                self.expectedOutcomes["delivered", default: 0] += 2
                self.expectedRequests += 2
            case 1:
                self.events.append(EndToEnd.alert([Self.unregistered]))
                self.expectedOutcomes["rejected", default: 0] += 1
                self.expectedInvalid += 1
                self.expectedRequests += 1
            case 2:
                self.events.append(EndToEnd.alert([Self.bad]))
                self.expectedOutcomes["rejected", default: 0] += 1
                self.expectedInvalid += 1
                self.expectedRequests += 1
            case 3:
                self.events.append(EndToEnd.alert(["zz-not-a-token"]))
                self.expectedOutcomes["rejected", default: 0] += 1
                self.expectedInvalid += 1
            case 4:
                self.events.append("this is not JSON")
                self.expectedDeadLetters += 1
            case 5:
                self.events.append(#"{"kind":"alert","text":"no tokens"}"#)
                self.expectedDeadLetters += 1
            case 6:
                self.events.append(#"{"kind":"something else"}"#)  // unmatched
            default:
                self.events.append(EndToEnd.alert([EndToEnd.token(2000 + index)], expires: 1_000))
                self.expectedOutcomes["expired", default: 0] += 1
            }
        }
    }

    /// The simulator's answers for the two dead tokens.
    var simulatorScenario: SimulatorScenario {
        var scenario = SimulatorScenario()
        scenario.unregisteredTokens = [Self.unregistered: 1_763_000_000_000]
        scenario.badTokens = [Self.bad]
        return scenario
    }

    var notificationCount: Int { self.expectedOutcomes.values.reduce(0, +) }

    /// Whether the result topics hold at least every expected record.
    func isComplete(_ results: Results) -> Bool {
        results.outcomes.count >= self.notificationCount && results.deadLetters.count >= self.expectedDeadLetters
            && results.invalidTokens.count >= self.expectedInvalid
    }

    /// Checks the records (exactly once each: nothing crashed, so nothing was processed twice), their schemas,
    /// and the requests the simulator saw.
    func check(_ results: Results, world: EndToEnd) async throws {
        #expect(results.outcomes.count == self.notificationCount)
        #expect(results.notificationIDs.count == self.notificationCount)
        var statuses: [String: Int] = [:]
        for outcome in results.outcomes { statuses[outcome.status, default: 0] += 1 }
        #expect(statuses == self.expectedOutcomes)
        #expect(results.invalidTokens.count == self.expectedInvalid)
        #expect(results.outcomes.allSatisfy { $0.headers.isEmpty }, "HTTP/2 outcomes carry no header")
        #expect(results.invalidTokenProtocols.allSatisfy { $0 == nil })
        #expect(Set(results.invalidTokens.compactMap { $0["reason"] }) == ["Unregistered", "BadDeviceToken"])
        let unregisteredRecord = try #require(results.invalidTokens.first { $0["reason"] == "Unregistered" })
        #expect(unregisteredRecord["invalid_since"] == "2025-11-13T02:13:20.000Z")
        let localReject = try #require(results.outcomes.first { $0.token == "zz-not-a-token" })
        #expect(localReject.json["http_status"] == nil)
        #expect(localReject.reason == "BadDeviceToken")
        #expect(results.deadLetters.count == self.expectedDeadLetters)
        #expect(results.deadLetters.contains { $0.value == Array("this is not JSON".utf8) })
        #expect(results.outcomes.filter { $0.status == "delivered" }.allSatisfy { $0.json["http_status"] == "200" })
        #expect(world.simulator.statistics.requestsReceived == self.expectedRequests)

        let report = try await RecordSchemas.validate(
            results.outcomes.map { (.outcome, $0.raw) } + results.invalidTokenValues.map { (.invalidToken, $0) }
        )
        #expect(report.problems.isEmpty, "schema problems: \(report.problems)")
        #expect(report.exitStatus == 0)
    }
}

/// GETs `path` from the admin server on `port`.
func httpGet(port: Int, path: String) async throws -> (Int, String) {
    let url = URL(string: "http://127.0.0.1:\(port)\(path)")!
    let (data, response) = try await URLSession.shared.data(from: url)
    return ((response as? HTTPURLResponse)?.statusCode ?? 0, String(decoding: data, as: UTF8.self))
}
