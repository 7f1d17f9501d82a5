import APNSCore
import Routing

/// Maps events to notifications (routes and templates, in production).
package protocol EventMapper: Sendable {
    /// What each matching route makes of `event`. An empty array means no route matched.
    func map(_ event: SourceEvent) -> [RouteMapping]
}
