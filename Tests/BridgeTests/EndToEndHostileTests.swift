import APNSSimulator
import Foundation
import Kafka
import Synchronization
import TestSupport
import TestWaiting
import Testing

@testable import Bridge
@testable import BridgeCore

// "One bad event never stops the line" (docs/operations.md, "Hostile input"): `pushbridge run` as a child process takes a few hundred good
// events mixed with every kind of hostile one, stays alive and ready, accounts for every event, commits to
// the end, and keeps its memory under a stated bound.

@Suite("End to end with hostile events", .serialized)
struct EndToEndHostileTests {
    /// The bound on the bridge's peak resident memory in this test (debug build).
    static let peakRSSBoundBytes = 512 << 20

    @Test(
        "hostile events among good ones: alive, ready, every event accounted for, commits at the end offsets, bounded memory"
    )
    func hostileEvents() async throws {
        try await withEndToEnd { world in
            let good = (0..<300).map { EndToEnd.alert([EndToEnd.token($0)]) }
            var hostile = Self.hostileValues()
            hostile.append(contentsOf: Self.hostileRecords())
            var records = good.map { HostileRecord(value: Array($0.utf8)) }
            // Interleaved: hostile events sit between good ones on every partition.
            for (index, record) in hostile.enumerated() {
                records.insert(record, at: min(records.count, index * 11 + 3))
            }
            let perPartition = try await Self.produce(records, to: world)
            let adminPort = try freeLoopbackPort()
            let path = try world.hostileConfiguration(adminPort: adminPort)
            let bridge = try BridgeProcess.start(
                configurationPath: path, log: world.directory.appendingPathComponent("hostile.log"))
            defer { if bridge.process.isRunning { bridge.kill(signal: SIGKILL) } }

            let total = Int64(records.count)
            // Done when the lag (high watermark minus committed offset, as `pushbridge_consumer_lag`) is 0 on every partition. The
            // committed offsets themselves are read after the bridge stopped: a reader in the bridge's group
            // would make it rebalance.
            var metrics = ""
            _ = try await eventually(timeout: .seconds(150), every: .seconds(1)) {
                guard bridge.process.isRunning else { return true }
                guard let (_, text) = try? await httpGet(port: adminPort, path: "/metrics") else { return false }
                metrics = text
                let lags = metricSamples(text, "pushbridge_consumer_lag")
                return lags.count == 4 && lags.allSatisfy { $0 == 0 } && metricSum(text, "pushbridge_in_flight") == 0
            }
            #expect(bridge.process.isRunning, "the bridge died on a hostile event; see hostile.log")
            let (readyStatus, readyBody) = try await httpGet(port: adminPort, path: "/readyz")
            #expect(readyStatus == 200, "\(readyBody)")
            let unmatched = metricSum(metrics, "pushbridge_events_unmatched_total")
            let peakRSS = try peakResidentBytes(of: bridge.process.processIdentifier)

            let results = try await world.results(timeout: .seconds(60)) { results in
                Int64(Self.accountedOffsets(results).count) + Int64(unmatched) >= total
            }
            bridge.kill(signal: SIGTERM)
            #expect(await bridge.waitForExit() == 0)
            #expect(try await world.committed() == perPartition)

            // Every consumed event: outcomes, or a dead letter, or counted as unmatched.
            let accounted = Self.accountedOffsets(results)
            let deadLetterBytes = results.deadLetters.reduce(0) { $0 + ($1.value?.count ?? 0) }
            #expect(
                Int64(accounted.count) + Int64(unmatched) == total,
                "accounted \(accounted.count) + unmatched \(unmatched) of \(total); \(results.deadLetters.count) dead letters of \(deadLetterBytes) bytes, first offsets \(results.deadLetters.prefix(3).map(\.offset))"
            )
            #expect(
                Set(results.outcomes.filter { $0.status == "delivered" }.map(\.token)).isSuperset(
                    of: Set((0..<300).map { EndToEnd.token($0) })))
            // Nothing with a control character ever reached APNs: faults visible before sending end `rejected`
            // without a request, never `failed` after retries.
            #expect(world.simulator.statistics.byStatus.keys.allSatisfy { $0 == 200 })
            let statuses = Set(results.outcomes.map(\.status))
            #expect(statuses.isSubset(of: ["delivered", "rejected"]), "\(statuses)")
            let reasons = Set(results.outcomes.compactMap(\.reason))
            // A collapse id with CR LF or control characters, an amplifying section, a huge token.
            #expect(reasons.isSuperset(of: ["BadCollapseId", "PayloadTooLarge", "BadDeviceToken"]), "\(reasons)")
            let errors = results.deadLetters.map { letter in
                String(decoding: letter.headers.first { $0.name == "pushbridge-error" }?.value ?? [], as: UTF8.self)
            }
            #expect(errors.contains { $0.contains("out of range") }, "\(errors)")
            // A dead letter too large for Kafka was cut to fit and says so.
            let truncated = results.deadLetters.filter { $0.headers.contains { $0.name == "pushbridge-truncated" } }
            #expect(!truncated.isEmpty)
            for letter in results.deadLetters {
                let error = letter.headers.first { $0.name == "pushbridge-error" }?.value ?? []
                #expect(error.count <= DeadLetter.maximumErrorBytes)
                #expect(!error.contains { $0 < 0x20 })
            }
            #expect(peakRSS < Self.peakRSSBoundBytes, "peak RSS \(peakRSS >> 20) MiB")
        }
    }

    /// Event values that are hostile to the parser, the templates, the headers or the numbers.
    static func hostileValues() -> [HostileRecord] {
        let token = EndToEnd.token(999_999)
        func alert(_ extra: String, tokens: String = "[\"\(token)\"]") -> HostileRecord {
            HostileRecord(value: Array(#"{"kind":"alert","text":"t","tokens":\#(tokens)\#(extra)}"#.utf8))
        }
        var values: [HostileRecord] = [
            // Numbers that overflow in every representation.
            alert(#","expires":10000000000000000"#),
            alert(#","expires":1e999999"#),
            alert(#","expires":-1e999999"#),
            alert(#","expires":1e-999999"#),
            alert(#","expires":\#(String(repeating: "9", count: 400))"#),
            alert(#","expires":-9223372036854775809"#),
            alert(#","expires":"not a number""#),
            alert(#","badge":1e400"#),
            // Control characters bound for headers.
            alert(#","cid":"x\r\napns-priority: 5""#),
            alert(#","cid":"\u0000\u0007\u001b[31m""#),
            alert(#","topic_suffix":"\r\n""#),
            // Wrong JSON types where arrays and strings are expected.
            alert("", tokens: "42"),
            alert("", tokens: #"{"a":1}"#),
            alert("", tokens: #"[1,2,{},null,true]"#),
            alert("", tokens: "null"),
            alert("", tokens: #"["\#(String(repeating: "z", count: 300_000))"]"#),
            alert("", tokens: #"["\#(token)\r\n"]"#),
            // Templates that would amplify: a section over many elements, each rendering a big string.
            HostileRecord(
                value: Array(
                    (#"{"kind":"items","tokens":["\#(token)"],"big":"\#(String(repeating: "b", count: 2_000))","items":["#
                        + Array(repeating: "1", count: 20_000).joined(separator: ",") + "]}").utf8
                )),
            // Not JSON, or barely.
            HostileRecord(value: nil),
            HostileRecord(value: []),
            HostileRecord(value: Array("   ".utf8)),
            HostileRecord(value: [0x7B, 0x22, 0xFF, 0xFE, 0x22, 0x3A, 0x31, 0x7D]),
            HostileRecord(
                value: Array(#"{"kind":"alert","text":"\#u{FF}\#u{FE}","tokens":["\#(token)"]}"#.utf8) + [0xC3, 0x28]),
            HostileRecord(
                value: Array((String(repeating: "[", count: 100_000) + String(repeating: "]", count: 100_000)).utf8)),
            HostileRecord(
                value: Array(
                    (String(repeating: #"{"a":"#, count: 50_000) + "1" + String(repeating: "}", count: 50_000)).utf8)),
            HostileRecord(value: Array(repeating: 0x41, count: 999_900)),
            HostileRecord(
                value: Array(("[" + Array(repeating: "{}", count: 300_000).joined(separator: ",") + "]").utf8)),
        ]
        values.append(alert(#","text2":"\#(String(repeating: "\\u0000", count: 20_000))""#))
        return values
    }

    /// Good values with hostile keys and headers.
    static func hostileRecords() -> [HostileRecord] {
        let value = Array(EndToEnd.alert([EndToEnd.token(888_888)]).utf8)
        return [
            HostileRecord(key: Array(repeating: 0x4B, count: 500_000), value: value),
            HostileRecord(value: value, headers: (0..<2_000).map { KafkaHeader(name: "h\($0)", value: [0x0D, 0x0A]) }),
            HostileRecord(
                value: value, headers: [KafkaHeader(name: "cid", value: Array(repeating: 0x07, count: 300_000))]),
            HostileRecord(value: value, headers: [KafkaHeader(name: "cid", value: nil)]),
            HostileRecord(key: Array(repeating: 0x4B, count: 400_000), value: Array(repeating: 0x41, count: 500_000)),
        ]
    }

    /// Produces the records round robin over the input partitions; returns how many went to each.
    static func produce(_ records: [HostileRecord], to world: EndToEnd) async throws -> [Int32: Int64] {
        var configuration = KafkaProducerConfiguration(bootstrapServers: world.cluster.bootstrapServers)
        configuration.properties = ["log_level": "0", "message.max.bytes": "2000000"]
        let producer = try KafkaProducer(configuration: configuration, logger: quietLogger()).running()
        var counts: [Int32: Int64] = [:]
        for (index, record) in records.enumerated() {
            let partition = Int32(index % 4)
            counts[partition, default: 0] += 1
            try await producer.send(
                topic: world.inputTopic, key: record.key ?? Array("key-\(index)".utf8), value: record.value,
                headers: record.headers, partition: partition
            )
        }
        await producer.close()
        return counts
    }

    /// The source coordinates of every event with an outcome or a dead letter.
    static func accountedOffsets(_ results: Results) -> Set<String> {
        var offsets = Set<String>()
        for outcome in results.outcomes {
            if let object = try? JSONSerialization.jsonObject(with: Data(outcome.raw)) as? [String: Any],
                let source = object["source"] as? [String: Any],
                let partition = source["partition"] as? Int, let offset = source["offset"] as? Int
            {
                offsets.insert("\(partition)/\(offset)")
            }
        }
        for letter in results.deadLetters {
            let header = { (name: String) in
                letter.headers.first { $0.name == name }.map { String(decoding: $0.value ?? [], as: UTF8.self) } ?? "?"
            }
            offsets.insert("\(header("pushbridge-source-partition"))/\(header("pushbridge-source-offset"))")
        }
        return offsets
    }
}

/// One input record of the hostile test.
struct HostileRecord: Sendable {
    var key: [UInt8]?
    var value: [UInt8]?
    var headers: [KafkaHeader] = []
}

extension EndToEnd {
    /// A configuration whose routes reach every template feature a hostile event can hit: typed leaves,
    /// header templates, `_headers.*`, and a section over an array.
    func hostileConfiguration(adminPort: Int) throws -> String {
        let routes = """
              - name: alerts
                input_topic: \(self.inputTopic)
                match: { kind: alert }
                device_tokens: "{{tokens}}"
                topic: com.example.app
                expiration: "{{expires}}"
                collapse_id: "c-{{cid}}"
                payload:
                  aps:
                    alert: "{{text}}"
                    badge: "{{badge}}"
                  extra: "{{text2}}"
              - name: header-collapse
                input_topic: \(self.inputTopic)
                match: { kind: alert }
                device_tokens: "{{tokens}}"
                topic: com.example.app
                collapse_id: "{{_headers.cid}}"
                payload:
                  aps:
                    alert: "from a header"
              - name: items
                input_topic: \(self.inputTopic)
                match: { kind: items }
                device_tokens: "{{tokens}}"
                topic: com.example.app
                payload:
                  aps:
                    alert: "{{#items}}{{big}}{{/items}}"
            """
        return try self.configuration(
            maxInFlight: 100, maxAttempts: 2, connections: 1, routes: routes, adminListen: "127.0.0.1:\(adminPort)",
            name: "hostile"
        )
    }
}

/// A TCP port on 127.0.0.1 that nothing listens on now, for a child to bind (its admin server). Unlike a
/// `RefusingPort` kept alive, the port is free again once this returns.
func freeLoopbackPort() throws -> Int {
    try RefusingPort().port
}

/// The peak resident set size of a process (`VmHWM` in /proc), in bytes.
func peakResidentBytes(of pid: Int32) throws -> Int {
    let status = try String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)
    let line = status.split(separator: "\n").first { $0.hasPrefix("VmHWM:") } ?? ""
    let kilobytes = line.split(separator: " ").dropFirst().first.flatMap { Int($0) } ?? 0
    return kilobytes * 1024
}

/// A metric's samples over all its labels in a Prometheus text exposition.
func metricSamples(_ exposition: String, _ name: String) -> [Double] {
    PrometheusExposition.samples(of: name, in: exposition)
}

/// The sum of a metric's samples over all its labels.
func metricSum(_ exposition: String, _ name: String) -> Double {
    PrometheusExposition.sum(of: name, in: exposition)
}

@Suite("End to end: a fatal producer error", .serialized)
struct EndToEndFatalProducerTests {
    @Test("a fatal producer error fails /healthz and /readyz, drains, and ends the run with an error")
    func fatalProducerError() async throws {
        try await withEndToEnd { world in
            try await world.produce((0..<20).map { EndToEnd.alert([EndToEnd.token($0)]) })
            let path = try world.configuration()
            let observed = Mutex<(health: Int?, ready: Int?)>((nil, nil))
            await #expect(throws: BridgeRuntime.Failure.self) {
                try await world.withBridge(configurationPath: path) { started in
                    _ = try await world.results { $0.outcomes.count >= 20 }
                    try started.producer.raiseFatalErrorForTesting(reason: "test: sequence desynchronised")
                    // The bridge stops by itself; the admin server answers until the very end.
                    _ = try await eventually(timeout: .seconds(30), every: .milliseconds(2)) {
                        guard let (health, _) = try? await httpGet(port: started.adminPort, path: "/healthz") else {
                            return true
                        }
                        guard health == 503 else { return false }
                        let ready = try? await httpGet(port: started.adminPort, path: "/readyz")
                        observed.withLock { $0 = (health, ready?.0) }
                        return true
                    }
                }
            }
            #expect(observed.withLock { $0.health } == 503)
            #expect(observed.withLock { $0.ready } == 503)
        }
    }
}
