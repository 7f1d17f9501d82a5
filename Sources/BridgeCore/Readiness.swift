import APNSCore
import Routing

/// What `/readyz` reports.
package struct Readiness: Sendable, Hashable {
    /// Whether the instance can serve its partitions and APNs accepts it.
    package var isReady: Bool
    /// Why not, when not ready (for example `halted: InvalidProviderToken (app default)`).
    package var reason: String?

    /// Ready.
    package static let ready = Readiness(isReady: true, reason: nil)

    /// Not ready, for `reason`.
    package static func notReady(_ reason: String) -> Readiness {
        Readiness(isReady: false, reason: reason)
    }
}
