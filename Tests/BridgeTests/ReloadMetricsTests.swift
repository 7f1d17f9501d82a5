import Configuration
import Foundation
import Prometheus
import TestSupport
import Testing

@testable import Bridge
@testable import BridgeCore

/// The metrics of reloads and credentials, as `/metrics` shows them (docs/operations.md, "Metrics").
@Suite("Reload metrics")
struct ReloadMetricsTests {
    func exposition(_ registry: PrometheusCollectorRegistry) -> [Substring] {
        String(decoding: registry.emitToBuffer(), as: UTF8.self).split(separator: "\n").filter { !$0.hasPrefix("#") }
    }

    @Test(
        "a certificate app's expiry is its certificate's not-after; a .p8 key has none; a removed app leaves no series")
    func credentialExpiry() throws {
        let tls = try TestTLS.generate()
        defer { tls.remove() }
        let configuration = BridgeConfiguration(
            kafka: KafkaSettings(bootstrapServers: "embedded"),
            apns: APNSSettings(auth: .token(keyFile: "/nonexistent.p8", keyID: "ABC123DEFG", teamID: "DEF123GHIJ")),
            apps: [
                "legacy": APNSSettings(
                    auth: .pem(certificateFile: tls.clientCertificatePath, keyFile: tls.clientKeyPath))
            ],
            routes: [])
        let credentials = ConfigurationReloader.credentials(of: configuration)
        #expect(credentials.map(\.app) == ["default", "legacy"])
        #expect(credentials[0].expiryEpochSeconds == nil)
        // TestTLS issues certificates valid for 29 days from now.
        let expected = Date().timeIntervalSince1970 + 29 * 24 * 3600
        let expiry = try #require(credentials[1].expiryEpochSeconds)
        #expect(abs(Double(expiry) - expected) < 3600)

        let registry = PrometheusCollectorRegistry()
        let metrics = ReloadMetrics(factory: BridgeMetrics.prometheusFactory(registry: registry))
        metrics.credentialsLoaded(credentials, atEpochSeconds: 1_790_000_000)
        let lines = self.exposition(registry)
        #expect(lines.contains("pushbridge_credential_expiry_seconds{app=\"legacy\"} \(expiry).0"))
        #expect(!lines.contains { $0.hasPrefix("pushbridge_credential_expiry_seconds{app=\"default\"}") })
        #expect(lines.contains("pushbridge_credential_loaded_seconds{app=\"default\"} 1790000000.0"))

        metrics.credentialsLoaded([credentials[0]], atEpochSeconds: 1_790_000_100)
        let after = self.exposition(registry)
        #expect(!after.contains { $0.contains("app=\"legacy\"") })
        #expect(after.contains("pushbridge_credential_loaded_seconds{app=\"default\"} 1790000100.0"))
    }

    @Test("the configuration info names only the hash in force; reloads are counted by result from 0")
    func configurationInfoAndReloads() {
        let registry = PrometheusCollectorRegistry()
        let metrics = ReloadMetrics(factory: BridgeMetrics.prometheusFactory(registry: registry))
        metrics.configuration(hash: "aaaaaaaaaaaa")
        metrics.configuration(hash: "bbbbbbbbbbbb")
        metrics.reloaded(.applied)
        metrics.reloaded(.refused)
        metrics.reloaded(.refused)
        let lines = self.exposition(registry)
        #expect(
            lines.filter { $0.hasPrefix("pushbridge_config_info") } == [
                "pushbridge_config_info{hash=\"bbbbbbbbbbbb\"} 1.0"
            ])
        #expect(lines.contains("pushbridge_config_reloads_total{result=\"applied\"} 1"))
        #expect(lines.contains("pushbridge_config_reloads_total{result=\"refused\"} 2"))
        #expect(lines.contains("pushbridge_config_reloads_total{result=\"failed\"} 0"))
        #expect(lines.contains("pushbridge_config_reloads_total{result=\"unchanged\"} 0"))
    }
}
