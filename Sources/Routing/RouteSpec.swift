/// One route as the configuration writes it (docs/configuration.md, `routes`): plain data, checked and compiled by
/// ``Router/init(routes:epochSeconds:)``.
///
/// Field names follow the YAML keys; the key paths in ``RouteCompileError`` use the YAML spelling
/// (`device_tokens`, `payload.aps.alert.title`) so the configuration loader can point at the line.
package struct RouteSpec: Sendable {
    /// The route's name, unique among routes; it appears in outcomes, dead letters and metrics.
    package var name: String
    /// The Kafka topic whose events this route maps.
    package var inputTopic: String
    /// A name under the configuration's `apps:`; `nil` selects the default `apns` block.
    package var app: String?
    /// Fields that must all equal the given values (dotted paths into the event JSON, type-exact equality),
    /// in the order written. Empty: every event of the topic matches.
    package var match: [(path: String, value: JSONValue)]
    /// Template for the device tokens: a single tag naming a string or an array of strings (fan-out), or text
    /// with tags that renders one token. Empty for a broadcast route (``channelID``).
    package var deviceTokens: String
    /// Template for the broadcast channel ID (iOS 18 Live Activities): the route sends Apple's broadcast request
    /// to the channel it renders instead of pushes to device tokens. Requires `push_type: liveactivity`, and
    /// excludes ``deviceTokens`` and ``collapseID``. `nil`: a device route.
    package var channelID: String?
    /// `apns-topic`, usually the app's bundle ID; the push type's suffix is added when it is missing.
    package var topic: String
    /// `apns-push-type` as written (`alert`, `background`, ...); checked against ``APNSCore/PushType``.
    package var pushType: String
    /// `apns-priority` (10, 5 or 1); `nil` uses the push type's default.
    package var priority: Int?
    /// Template rendering `apns-expiration` in epoch seconds; exclusive with ``ttl``.
    package var expiration: String?
    /// Time to live: `apns-expiration` becomes the mapping time plus this; exclusive with ``expiration``.
    package var ttl: Duration?
    /// Template for `apns-collapse-id`.
    package var collapseID: String?
    /// The payload as a structured template: every string leaf is a template. Exclusive with ``payloadFrom``.
    package var payload: JSONValue?
    /// A dotted path to an object in the event that is sent as the payload. Exclusive with ``payload``.
    package var payloadFrom: String?
    /// Template for the ordering key: notifications of this route with the same rendered key to the same device
    /// token are sent strictly in input order, one at a time. The literal `key` means the Kafka message key.
    /// `nil`: no ordering (every notification is sent at once).
    package var orderingKey: String?
    /// Whether a newer notification of the same ordering key replaces one still waiting to be sent (the
    /// replaced one ends `superseded`). Requires ``orderingKey``.
    package var coalesce: Bool
    /// Named templates rendered once per event and copied as a JSON object into every outcome and invalid-token
    /// record of its notifications, and into its dead letter (docs/configuration.md, "Context on records"); in
    /// the order written. Empty: the route's records carry no context (and stay the schema versions they were).
    package var context: [(name: String, value: JSONValue)]
    /// The lane whose share of `kafka.max_in_flight` the route's notifications take (`lane:`, a name under the
    /// configuration's `lanes:`); `nil`: the default lane.
    package var lane: String?

    /// Creates a route specification.
    package init(
        name: String,
        inputTopic: String,
        app: String? = nil,
        match: [(path: String, value: JSONValue)] = [],
        deviceTokens: String,
        topic: String,
        pushType: String = "alert",
        priority: Int? = nil,
        expiration: String? = nil,
        ttl: Duration? = nil,
        collapseID: String? = nil,
        payload: JSONValue? = nil,
        payloadFrom: String? = nil,
        channelID: String? = nil,
        orderingKey: String? = nil,
        coalesce: Bool = false,
        context: [(name: String, value: JSONValue)] = [],
        lane: String? = nil
    ) {
        self.channelID = channelID
        self.name = name
        self.inputTopic = inputTopic
        self.app = app
        self.match = match
        self.deviceTokens = deviceTokens
        self.topic = topic
        self.pushType = pushType
        self.priority = priority
        self.expiration = expiration
        self.ttl = ttl
        self.collapseID = collapseID
        self.payload = payload
        self.payloadFrom = payloadFrom
        self.orderingKey = orderingKey
        self.coalesce = coalesce
        self.context = context
        self.lane = lane
    }
}
