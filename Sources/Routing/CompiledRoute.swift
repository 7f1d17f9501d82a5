import APNSCore
import SafeText

/// Collects the problems of one route while it compiles.
struct RouteDiagnostics {
    let routeIndex: Int
    let routeName: String
    private(set) var errors: [RouteCompileError] = []

    init(routeIndex: Int, routeName: String) {
        self.routeIndex = routeIndex
        self.routeName = routeName
    }

    mutating func report(_ code: RouteCompileError.Code, at keyPath: String, _ message: String, hint: String? = nil) {
        self.errors.append(
            RouteCompileError(
                code: code, routeIndex: self.routeIndex, routeName: self.routeName, keyPath: keyPath,
                message: message, hint: hint))
    }
}

/// One route, checked and with its templates parsed.
final class CompiledRoute: Sendable {
    /// How `apns-expiration` is found.
    enum Expiration: Sendable {
        case none
        case template(TextTemplate)
        case ttl(seconds: Int64)
    }

    /// Where the payload comes from.
    enum Payload: Sendable {
        case template(PayloadTemplate)
        case from(TemplatePath)
    }

    /// Where the ordering key comes from (`ordering_key`).
    enum OrderingKey: Sendable {
        /// `ordering_key: key`: the Kafka message key's bytes.
        case kafkaKey
        /// A template rendered like the route's other header templates.
        case template(TextTemplate)
    }

    let name: String
    let inputTopic: String
    let app: String?
    let match: [(path: TemplatePath, value: JSONValue)]
    let deviceTokens: TextTemplate
    /// The broadcast channel ID's template; `nil` for a device route (the common case: it costs device
    /// notifications one `nil` check per event).
    let channelID: TextTemplate?
    let topic: String
    let pushType: PushType
    let priority: Priority
    /// `nil`: the route does not order its notifications.
    let orderingKey: OrderingKey?
    /// `coalesce: true` (only with ``orderingKey``).
    let coalesce: Bool
    /// `lane:`; `nil`: the default lane.
    let lane: String?
    let expiration: Expiration
    let collapseID: TextTemplate?
    let payload: Payload
    /// The largest payload: the push type's, or a broadcast's (5120 bytes).
    let maxPayloadBytes: Int
    /// `context`: rendered once per event for its records; `nil` for a route without one (one `nil` check per
    /// event).
    let context: ContextTemplate?

    /// The longest `apns-collapse-id` APNs accepts, in bytes.
    static let maxCollapseIDBytes = NotificationValidation.maximumCollapseIDBytes
    /// The most a header template (`device_tokens`, `collapse_id`, `expiration`) may render, in bytes, and the
    /// most of a device token taken from the event that is kept. Every value APNs accepts is far shorter (200
    /// hex digits for a token, 64 bytes for a collapse id, 20 digits for an expiration); a longer one is
    /// rejected with Apple's reason for the field, and keeping only this much bounds what the outcome records
    /// of such a notification carry.
    static let maximumHeaderBytes = 256
    /// The longest `ttl`: APNs stores a notification for at most 30 days, so a longer one is a mistake (and a
    /// bound keeps `now + ttl` far from overflowing).
    static let maximumTTL = Duration.seconds(366 * 86_400)
    /// The longest ordering key, in bytes (a rendered one, or the Kafka key). A key is held while its
    /// notifications wait, so it is bounded like every other text an event brings; a longer one makes the event
    /// a dead letter naming `ordering_key`.
    package static let maximumOrderingKeyBytes = 1024

    /// Compiles `spec`, reporting every problem to `diagnostics`; `nil` when there was any.
    init?(compiling spec: RouteSpec, diagnostics: inout RouteDiagnostics) {
        let errorsBefore = diagnostics.errors.count
        self.name = spec.name
        self.inputTopic = spec.inputTopic
        self.app = spec.app
        if spec.name.isEmpty {
            diagnostics.report(.missingField, at: "name", "the route has no name", hint: "add `name: <route-name>`")
        }
        if spec.inputTopic.isEmpty {
            diagnostics.report(
                .missingField, at: "input_topic", "the route has no input topic",
                hint: "add `input_topic: <kafka topic>`")
        }

        self.match = spec.match.compactMap { condition in
            guard let path = TemplatePath(condition.path), !condition.path.isEmpty, path.root != .implicit else {
                diagnostics.report(
                    .invalidValue, at: "match.\(condition.path)", "\"\(condition.path)\" is not a dotted path",
                    hint: "name a field of the event such as `type` or `order.status`")
                return nil
            }
            return (path: path, value: condition.value)
        }

        if let channelID = spec.channelID {
            self.deviceTokens = .empty
            self.channelID = Self.compileChannelID(channelID, spec: spec, diagnostics: &diagnostics)
        } else {
            self.deviceTokens = Self.compileDeviceTokens(spec.deviceTokens, diagnostics: &diagnostics)
            self.channelID = nil
        }

        let pushType = Self.compilePushType(spec.pushType, diagnostics: &diagnostics)
        self.pushType = pushType ?? .alert
        if spec.channelID != nil, let pushType, pushType != .liveactivity {
            diagnostics.report(
                .invalidValue, at: "push_type",
                "a broadcast route (channel_id) must use push_type liveactivity, not \(pushType.rawValue)",
                hint: "set `push_type: liveactivity` (Apple broadcasts Live Activity updates only), or send to "
                    + "devices with `device_tokens` instead of `channel_id`")
        }
        self.maxPayloadBytes =
            spec.channelID == nil ? self.pushType.maxPayloadBytes : NotificationValidation.maximumBroadcastPayloadBytes
        self.priority = Self.compilePriority(spec.priority, pushType: pushType, diagnostics: &diagnostics)
        if spec.topic.isEmpty {
            diagnostics.report(
                .missingField, at: "topic", "the route has no APNs topic",
                hint: "add `topic: <bundle ID>` (for mdm, the certificate's topic)")
        }
        self.topic = self.pushType.topic(for: spec.topic)
        if !spec.topic.isEmpty, !NotificationValidation.isHeaderValue(self.topic) {
            diagnostics.report(
                .invalidValue, at: "topic",
                "the topic has a character APNs cannot take in a header (control character, non-ASCII, or a "
                    + "space at either end)",
                hint: "write the bundle ID, e.g. `topic: com.example.app`")
        }

        self.expiration = Self.compileExpiration(spec, diagnostics: &diagnostics)
        self.collapseID = spec.collapseID.flatMap { source in
            guard let template = Self.compileTemplate(source, at: "collapse_id", diagnostics: &diagnostics) else {
                return nil
            }
            if let text = template.constantText, text.utf8.count > Self.maxCollapseIDBytes {
                diagnostics.report(
                    .invalidValue, at: "collapse_id",
                    "\"\(text)\" is \(text.utf8.count) bytes; APNs accepts at most \(Self.maxCollapseIDBytes)",
                    hint: "shorten it")
            } else if let text = template.constantText, !NotificationValidation.isHeaderValue(text) {
                diagnostics.report(
                    .invalidValue, at: "collapse_id",
                    "the collapse id has a character APNs cannot take in a header (control character, "
                        + "non-ASCII, or a space at either end)",
                    hint: "use visible ASCII characters only")
            }
            return template
        }
        self.payload = Self.compilePayload(spec, diagnostics: &diagnostics)
        self.orderingKey = Self.compileOrderingKey(spec.orderingKey, diagnostics: &diagnostics)
        self.coalesce = spec.coalesce
        self.context = ContextTemplate(compiling: spec.context, diagnostics: &diagnostics)
        self.lane = spec.lane
        if spec.coalesce, spec.orderingKey == nil {
            diagnostics.report(
                .missingField, at: "coalesce",
                "coalesce needs ordering_key: it replaces a waiting notification by a newer one of the same key",
                hint: "add `ordering_key: \"{{activity.id}}\"` (or `ordering_key: key` for the Kafka message key), "
                    + "or remove `coalesce`")
        }

        if diagnostics.errors.count > errorsBefore { return nil }
    }

    /// The event paths this route may read, each whole (`[]`: the whole event); everything else of an event
    /// need not be built.
    var readPaths: [[String]] {
        var paths = self.match.compactMap { $0.path.readPath(insideSection: false) }
        paths += self.deviceTokens.readPaths
        paths += self.channelID?.readPaths ?? []
        if case .template(let template) = self.expiration { paths += template.readPaths }
        paths += self.collapseID?.readPaths ?? []
        switch self.payload {
        case .template(let template): paths += template.readPaths
        case .from(let path): paths += path.readPath(insideSection: false).map { [$0] } ?? []
        }
        if case .template(let template) = self.orderingKey { paths += template.readPaths }
        paths += self.context?.readPaths ?? []
        return paths
    }
}
