import APNSCore
import Routing

/// The pipeline's mapper on the configured routes and templates.
public struct RouterMapper: EventMapper {
    /// The compiled routes.
    public let router: Router

    /// Creates a mapper over `router`.
    public init(router: Router) {
        self.router = router
    }

    public func map(_ event: SourceEvent) -> [RouteMapping] {
        self.router.map(event: event)
    }
}
