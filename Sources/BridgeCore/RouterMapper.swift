import APNSCore
import Routing

/// The pipeline's mapper on the configured routes and templates.
package struct RouterMapper: EventMapper {
    /// The compiled routes.
    package let router: Router

    /// Creates a mapper over `router`.
    package init(router: Router) {
        self.router = router
    }

    package func map(_ event: SourceEvent) -> [RouteMapping] {
        self.router.map(event: event)
    }
}
