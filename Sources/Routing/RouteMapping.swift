import APNSCore

/// What one matching route made of one event.
///
/// Its properties are constants: an explicit initialiser of a struct with `var` properties copies the new value once
/// more (docs/architecture.md, "The parts and their boundaries"), and every event's mapping is made by one.
package struct RouteMapping: Sendable {
    /// The route's name.
    package let route: String
    /// The route's `app` (`nil`: the default `apns` block).
    package let app: String?
    /// Notifications, or why there are none.
    package let outcome: Outcome
    /// Whether the route has `coalesce: true`: a newer notification of the same ordering key replaces one that
    /// still waits (its notifications then carry ``MappedNotification/orderingKey``).
    package let coalesces: Bool
    /// The route's `context` rendered from the event, for its notifications' records and its dead letter; `nil`
    /// when the route has none (or no route was reached: the event is not JSON).
    package let context: RecordContext?
    /// The route's lane (`lane:`); `nil`: the default lane. A pipeline without lanes never reads it.
    package let lane: String?

    /// Creates a mapping.
    package init(
        route: String, app: String?, outcome: Outcome, coalesces: Bool = false, context: RecordContext? = nil,
        lane: String? = nil
    ) {
        self.route = route
        self.app = app
        self.outcome = outcome
        self.coalesces = coalesces
        self.context = context
        self.lane = lane
    }

    /// Notifications, or why there are none.
    package enum Outcome: Sendable {
        /// One notification per device token, in token order (never empty).
        case notifications([MappedNotification])
        /// The event cannot become a notification through this route; it goes to the dead-letter topic.
        case deadLetter(DeadLetterReason)
    }
}

/// One notification produced by a route, with its place in the fan-out.
package struct MappedNotification: Sendable {
    /// The position of its device token among the event's tokens (0-based); part of its deterministic id.
    package var tokenIndex: Int
    /// The request to send.
    package var notification: Notification
    /// A fault the mapper already knows APNs would reject the notification for, with Apple's reason.
    ///
    /// Detected here: ``APNSCore/Reason/payloadTooLarge`` when rendering the payload passed the push type's
    /// ``APNSCore/PushType/maxPayloadBytes`` or its sections ran out of steps (rendering stops there, and
    /// ``notification``'s payload is then the part rendered, cut to one byte over the limit); and what
    /// ``APNSCore/NotificationValidation/validateHeaderValues(_:)`` would find in the header values (a token or
    /// collapse id with a character outside visible ASCII or too long, a negative expiration:
    /// `BadDeviceToken`, `BadCollapseId`, `BadExpirationDate`; the topic and priority are checked when the
    /// route compiles), including a header template that rendered past its limit. The pipeline does not send such a notification but
    /// publishes a `rejected` outcome with this reason and a null `http_status` (docs/data-contract.md), exactly as for the
    /// sender's own validation (which also checks the token's format). `nil`: nothing known against it.
    package var localRejection: Reason?
    /// Whether the payload is known to be a JSON object, so the check before sending need not parse it again
    /// (see ``APNSCore/NotificationValidation/validate(_:payloadIsJSONObject:)``). The router's are: a route's
    /// payload template is an object (checked when it compiles) and `payload_from` takes only an object.
    package var payloadIsJSONObject: Bool
    /// The rendered `ordering_key` (or the Kafka key's bytes, for `ordering_key: key`) when the route orders its
    /// notifications: those of one route with the same key to the same device token are sent one at a time, in
    /// input order. `nil` for a route without `ordering_key`.
    package var orderingKey: [UInt8]?

    /// Creates a mapped notification.
    package init(
        tokenIndex: Int, notification: Notification, localRejection: Reason? = nil, payloadIsJSONObject: Bool = false,
        orderingKey: [UInt8]? = nil
    ) {
        self.tokenIndex = tokenIndex
        self.notification = notification
        self.localRejection = localRejection
        self.payloadIsJSONObject = payloadIsJSONObject
        self.orderingKey = orderingKey
    }
}

/// Why an event became a dead letter for a route: human-readable, and naming the route and the field.
package struct DeadLetterReason: Error, Sendable, Hashable, CustomStringConvertible {
    /// What kind of problem it is.
    package enum Code: String, Sendable, Hashable {
        /// The event's value is not a JSON document (or is a tombstone).
        case notJSON
        /// A required value is missing or null (no device token, `payload_from` not found).
        case missingValue
        /// A value has the wrong type or form (a token that is not a string, an expiration that is not an
        /// integer, a `payload_from` that is not an object).
        case invalidValue
        /// A number the event carries cannot be used as a number: anywhere in the event, one beyond the
        /// double range (`1e999999`, a 400-digit integer); as an expiration, one beyond 64-bit epoch seconds.
        /// The message names its path (`number out of range at order.total`).
        case numberOutOfRange
    }

    /// What kind of problem it is.
    package var code: Code
    /// The route's name.
    package var route: String
    /// The route field at fault, as written in the configuration (`device_tokens`, `expiration`, ...); `nil`
    /// when the event as a whole is at fault (not JSON, or a number out of range anywhere in it).
    package var field: String?
    /// What is wrong, without the route and field.
    package var message: String

    /// Creates a reason.
    package init(code: Code, route: String, field: String?, message: String) {
        self.code = code
        self.route = route
        self.field = field
        self.message = message
    }

    /// The text for the `pushbridge-error` header: `route order-shipped: device_tokens: ...`, or the message
    /// alone when no route was reached (the event is not JSON).
    package var description: String {
        if let field = self.field {
            return "route \(self.route): \(field): \(self.message)"
        }
        if self.route.isEmpty { return self.message }
        return "route \(self.route): \(self.message)"
    }
}
