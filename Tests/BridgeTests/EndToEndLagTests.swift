import Crypto
import Foundation
import TestSupport
import TestWaiting
import Testing

// What an operator's autoscaler and alerts read: the lag gauge, from outside the process.

@Suite("Lag as the operator sees it", .serialized)
struct EndToEndLagTests {
    /// Before, the gauge used the high watermark librdkafka cached from the last fetch, and a halted line's
    /// partitions are paused, so nothing is fetched: the lag stood still while the backlog grew, and a halted bridge
    /// looked idle to KEDA and to the `Lag growing` alert.
    @Test("a halted line with a growing backlog shows the whole backlog as lag, paused partitions included")
    func haltedLineShowsItsBacklog() async throws {
        try await withEndToEnd { world in
            let first = 20
            try await world.produce((0..<first).map { EndToEnd.alert([EndToEnd.token($0)]) })
            try world.write(key: P256.Signing.PrivateKey(), to: "Wrong.p8")
            let port = try freeLoopbackPort()
            let path = try world.configuration(
                maxInFlight: 20, keyFile: "Wrong.p8", adminListen: "127.0.0.1:\(port)", name: "halted")
            let bridge = try BridgeProcess.start(
                configurationPath: path, log: world.directory.appendingPathComponent("halted.log"))
            try await waitUntil(timeout: .seconds(60), every: .milliseconds(100)) {
                (try? await httpGet(port: port, path: "/readyz"))?.0 == 503
            }
            // Produced while the line is halted and its partitions paused: only a fresh high watermark shows them.
            let backlog = 500
            try await world.produce((first..<(first + backlog)).map { EndToEnd.alert([EndToEnd.token($0)]) })
            let total = Double(first + backlog)
            var lag = 0.0
            // The gauge is refreshed every 5 s; nothing is committed while halted, so the lag is everything produced.
            _ = try await eventually(timeout: .seconds(60), every: .milliseconds(500)) {
                lag = (try? await consumerLag(port: port)) ?? 0
                return lag >= total
            }
            bridge.kill(signal: SIGTERM)
            #expect(await bridge.waitForExit() == 0)
            #expect(lag == total, "sum(pushbridge_consumer_lag) is \(lag) with \(Int(total)) events uncommitted")
        }
    }
}

/// `sum(pushbridge_consumer_lag)` as `/metrics` on `port` shows it.
func consumerLag(port: Int) async throws -> Double {
    let (_, metrics) = try await httpGet(port: port, path: "/metrics")
    return metrics.split(separator: "\n")
        .filter { $0.hasPrefix("pushbridge_consumer_lag{") }
        .compactMap { Double($0.split(separator: " ").last ?? "") }
        .reduce(0, +)
}
