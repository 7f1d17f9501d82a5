import CoreMetrics
import Synchronization

/// The metrics of configuration reloads and of the credentials in use (docs/operations.md, "Metrics"):
/// `pushbridge_config_reloads_total{result}`, `pushbridge_config_info{hash}`,
/// `pushbridge_credential_expiry_seconds{app}` and `pushbridge_credential_loaded_seconds{app}`.
package final class ReloadMetrics: Sendable {
    /// How a reload ended, the `result` label.
    package enum Result: String, Sendable, CaseIterable {
        /// The new configuration runs: routes, retry and, when they changed, APNs senders replaced.
        case applied
        /// Nothing the bridge uses changed (a SIGHUP with the same files): nothing was replaced.
        case unchanged
        /// It loads, but a key changed that applies only at a restart: the previous configuration keeps running.
        case refused
        /// It does not load (a problem `pushbridge validate` would print, or a credential that does not open): the
        /// previous configuration keeps running.
        case failed
    }

    private let factory: any MetricsFactory
    private let reloads: [Result: Counter]
    private let info = Mutex<(hash: String, gauge: Gauge)?>(nil)
    private let credentials = Mutex<[String: (expiry: Gauge?, loaded: Gauge)]>([:])

    /// Creates the metrics through `factory`; every `result` starts at 0.
    package init(factory: any MetricsFactory) {
        self.factory = factory
        var reloads: [Result: Counter] = [:]
        for result in Result.allCases {
            reloads[result] = Counter(
                label: "pushbridge_config_reloads_total", dimensions: [("result", result.rawValue)], factory: factory)
        }
        self.reloads = reloads
    }

    /// Counts a reload that ended with `result`.
    package func reloaded(_ result: Result) {
        self.reloads[result]?.increment()
    }

    /// `pushbridge_config_info{hash}` is 1 for the configuration in force, and no series is left for the one before.
    package func configuration(hash: String) {
        self.info.withLock { info in
            guard info?.hash != hash else { return }
            info?.gauge.destroy()
            let gauge = Gauge(label: "pushbridge_config_info", dimensions: [("hash", hash)], factory: self.factory)
            gauge.record(1)
            info = (hash, gauge)
        }
    }

    /// One app's credentials as loaded now.
    package struct Credential: Sendable, Hashable {
        /// The app: `default` for the `apns` block, else its name under `apps`.
        package var app: String
        /// The certificate's not-after time in seconds since the epoch; `nil` for a `.p8` key, which has none.
        package var expiryEpochSeconds: Int64?

        /// Creates one.
        package init(app: String, expiryEpochSeconds: Int64?) {
            self.app = app
            self.expiryEpochSeconds = expiryEpochSeconds
        }
    }

    /// Every app's credentials were loaded at `epochSeconds` (at start, and by a reload that replaced the senders):
    /// sets their gauges, and removes those of apps no longer configured.
    package func credentialsLoaded(_ loaded: [Credential], atEpochSeconds epochSeconds: Int64) {
        self.credentials.withLock { gauges in
            let kept = Set(loaded.map(\.app))
            for (app, gauge) in gauges where !kept.contains(app) {
                gauge.expiry?.destroy()
                gauge.loaded.destroy()
                gauges[app] = nil
            }
            for credential in loaded {
                let dimensions = [("app", credential.app)]
                var gauge =
                    gauges[credential.app]
                    ?? (
                        nil,
                        Gauge(
                            label: "pushbridge_credential_loaded_seconds", dimensions: dimensions, factory: self.factory
                        )
                    )
                gauge.loaded.record(epochSeconds)
                if let expiry = credential.expiryEpochSeconds {
                    gauge.expiry =
                        gauge.expiry
                        ?? Gauge(
                            label: "pushbridge_credential_expiry_seconds", dimensions: dimensions, factory: self.factory
                        )
                    gauge.expiry?.record(expiry)
                } else {
                    gauge.expiry?.destroy()
                    gauge.expiry = nil
                }
                gauges[credential.app] = gauge
            }
        }
    }
}
