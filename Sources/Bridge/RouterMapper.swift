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

    public func map(_ event: SourceEvent) -> [RouteResult] {
        let routingEvent = RoutingEvent(
            topic: event.source.topic,
            partition: event.source.partition,
            offset: event.source.offset,
            key: event.source.key,
            timestampMilliseconds: event.timestampMilliseconds,
            // Templates see a null header as an empty one (dead letters keep it null).
            headers: event.headers.map { (name: $0.0, value: $0.1 ?? []) },
            value: event.value
        )
        return self.router.map(event: routingEvent).map { mapping in
            switch mapping.outcome {
            case .notifications(let notifications):
                .notifications(
                    route: mapping.route,
                    app: mapping.app,
                    notifications.map {
                        // Every payload the router writes is a JSON object: the route's payload template is an
                        // object (checked when it compiles) and `payload_from` takes only an object.
                        RoutedNotification($0.notification, localFault: $0.localRejection, payloadIsJSONObject: true)
                    }
                )
            case .deadLetter(let reason):
                .deadLetter(route: mapping.route, reason: reason.description)
            }
        }
    }
}
