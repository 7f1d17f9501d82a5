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

    private static func compileTemplate(
        _ source: String,
        at keyPath: String,
        diagnostics: inout RouteDiagnostics
    ) -> TextTemplate? {
        do {
            return try TextTemplate(source)
        } catch {
            diagnostics.report(.brokenTemplate, at: keyPath, error.message, hint: error.hint)
            return nil
        }
    }

    private static func compileDeviceTokens(_ source: String, diagnostics: inout RouteDiagnostics) -> TextTemplate {
        let fallback = TextTemplate.empty
        guard !source.isEmpty else {
            diagnostics.report(
                .missingField, at: "device_tokens", "the route has no device_tokens template",
                hint: "name the event's token field, e.g. `device_tokens: \"{{customer.apns_tokens}}\"`")
            return fallback
        }
        guard let template = Self.compileTemplate(source, at: "device_tokens", diagnostics: &diagnostics) else {
            return fallback
        }
        if !template.hasTags {
            diagnostics.report(
                .deviceTokensNotTemplate, at: "device_tokens",
                "\"\(source)\" has no tag, so every event would go to the same fixed device",
                hint: "name the event's token field, e.g. `device_tokens: \"{{customer.apns_tokens}}\"`")
        }
        return template
    }

    /// `channel_id`: a template (usually one tag), alone among the destinations: `device_tokens` and
    /// `collapse_id` are refused with it. A constant one (no tag) is checked as a channel ID now.
    private static func compileChannelID(
        _ source: String, spec: RouteSpec, diagnostics: inout RouteDiagnostics
    ) -> TextTemplate? {
        if !spec.deviceTokens.isEmpty {
            diagnostics.report(
                .conflictingFields, at: "channel_id", "both device_tokens and channel_id are given",
                hint: "a route sends to device tokens or to one broadcast channel: keep `device_tokens` or "
                    + "`channel_id`, and make another route for the other")
        }
        if spec.collapseID != nil {
            diagnostics.report(
                .conflictingFields, at: "collapse_id", "a broadcast route (channel_id) cannot set collapse_id",
                hint: "remove `collapse_id`: Apple's broadcast request has no apns-collapse-id header")
        }
        guard !source.isEmpty else {
            diagnostics.report(
                .missingField, at: "channel_id", "channel_id is empty",
                hint: "name the event's channel field, e.g. `channel_id: \"{{match.channel}}\"`, or write a "
                    + "channel ID that `pushbridge channels create` printed")
            return nil
        }
        guard let template = Self.compileTemplate(source, at: "channel_id", diagnostics: &diagnostics) else {
            return nil
        }
        if let text = template.constantText, let reason = NotificationValidation.validateChannelID(text) {
            diagnostics.report(
                .invalidValue, at: "channel_id",
                "\(JSONValue.string(text).messageExcerpt) is not a channel ID (\(reason.rawValue))",
                hint: "write the base64 ID that `pushbridge channels create` printed, or a tag such as "
                    + "\"{{match.channel}}\"")
        }
        return template
    }

    /// `ordering_key`: the literal `key` (the Kafka message key) or a template with at least one tag. A key
    /// without a tag would put every notification of the route to one device in one line: almost always a
    /// forgotten `{{ }}`.
    private static func compileOrderingKey(_ source: String?, diagnostics: inout RouteDiagnostics) -> OrderingKey? {
        guard let source else { return nil }
        let hint =
            "write a tag naming the event's key field, e.g. `ordering_key: \"{{activity.id}}\"`, or "
            + "`ordering_key: key` for the Kafka message key"
        if source.allSatisfy(\.isWhitespace) {
            diagnostics.report(.missingField, at: "ordering_key", "ordering_key is empty", hint: hint)
            return nil
        }
        if source == "key" { return .kafkaKey }
        guard let template = Self.compileTemplate(source, at: "ordering_key", diagnostics: &diagnostics) else {
            return nil
        }
        guard template.hasTags else {
            diagnostics.report(
                .invalidValue, at: "ordering_key",
                "\"\(source)\" has no tag, so every notification of the route to a device would share one key",
                hint: hint)
            return nil
        }
        return .template(template)
    }

    private static func compilePushType(_ text: String, diagnostics: inout RouteDiagnostics) -> PushType? {
        if let pushType = PushType(rawValue: text) { return pushType }
        let names = PushType.allCases.map(\.rawValue)
        let suggestion = Suggestion.closest(to: text, among: names)
        diagnostics.report(
            .unknownPushType, at: "push_type", "unknown push type \"\(text)\"",
            hint: suggestion.map { "did you mean \"\($0)\"?" } ?? "use one of: \(names.joined(separator: ", "))")
        return nil
    }

    private static func compilePriority(
        _ value: Int?,
        pushType: PushType?,
        diagnostics: inout RouteDiagnostics
    ) -> Priority {
        let fallback = pushType?.defaultPriority ?? .immediate
        guard let value else { return fallback }
        guard let priority = Priority(rawValue: value) else {
            diagnostics.report(
                .invalidPriority, at: "priority", "priority \(value) is not one APNs accepts",
                hint: "use 10 (immediate), 5 (power-considerate) or 1 (power-saving)")
            return fallback
        }
        if let pushType, !pushType.allows(priority) {
            diagnostics.report(
                .priorityNotAllowed, at: "priority",
                "push type \(pushType.rawValue) does not allow priority \(value)",
                hint: "use priority 5 (or leave it out: the default is \(pushType.defaultPriority.rawValue))")
        }
        return priority
    }

    private static func compileExpiration(_ spec: RouteSpec, diagnostics: inout RouteDiagnostics) -> Expiration {
        if spec.expiration != nil, spec.ttl != nil {
            diagnostics.report(
                .conflictingFields, at: "expiration", "both expiration and ttl are given",
                hint: "keep one: `expiration` (epoch seconds from the event) or `ttl` (a duration from now)")
            return .none
        }
        if let ttl = spec.ttl {
            guard ttl >= .seconds(1) else {
                diagnostics.report(
                    .invalidValue, at: "ttl", "ttl must be at least one second, got \(ttl)",
                    hint: "write a duration such as `ttl: 1h`; for \"deliver now or never\" use `expiration: \"0\"`")
                return .none
            }
            guard ttl <= Self.maximumTTL else {
                diagnostics.report(
                    .invalidValue, at: "ttl", "ttl must be at most 366 days, got \(ttl)",
                    hint: "APNs keeps a notification for at most 30 days; write e.g. `ttl: 720h`")
                return .none
            }
            // Within 1 s ... 366 days, so the components are exact and small.
            return .ttl(seconds: ttl.components.seconds)
        }
        guard let source = spec.expiration,
            let template = Self.compileTemplate(source, at: "expiration", diagnostics: &diagnostics)
        else { return .none }
        if let text = template.constantText, (Int64(text) ?? -1) < 0 {
            diagnostics.report(
                .invalidValue, at: "expiration", "\"\(text)\" is not epoch seconds",
                hint: "write a tag naming the event's expiry, e.g. \"{{expires_at}}\", or use `ttl: 1h`")
        }
        return .template(template)
    }

    private static func compilePayload(_ spec: RouteSpec, diagnostics: inout RouteDiagnostics) -> Payload {
        let fallback = Payload.template(.constant(Array("{}".utf8)))
        switch (spec.payload, spec.payloadFrom) {
        case (.some, .some):
            diagnostics.report(
                .conflictingFields, at: "payload", "both payload and payload_from are given",
                hint: "keep `payload` (a template) or `payload_from` (a path to a ready payload), not both")
            return fallback
        case (nil, nil):
            diagnostics.report(
                .missingField, at: "payload", "the route has neither payload nor payload_from",
                hint: "add a `payload:` template, or `payload_from: <path>` when the event carries the payload")
            return fallback
        case (nil, .some(let pathText)):
            guard let path = TemplatePath(pathText), path.root == .scope else {
                diagnostics.report(
                    .invalidValue, at: "payload_from", "\"\(pathText)\" is not a dotted path into the event",
                    hint: "name the event's field that holds the payload object, e.g. `payload_from: notification`")
                return fallback
            }
            return .from(path)
        case (.some(let tree), nil):
            guard case .object = tree else {
                diagnostics.report(
                    .invalidValue, at: "payload",
                    "the payload is \(tree.typeNameWithArticle); APNs wants a JSON object",
                    hint: "write the payload as a mapping, e.g. `payload: { aps: { alert: \"...\" } }`")
                return fallback
            }
            return .template(PayloadTemplate(compiling: tree, keyPath: "payload", diagnostics: &diagnostics))
        }
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

    // MARK: Mapping

    /// Whether every `match` condition holds for the event.
    func matches(_ scope: RenderScope) -> Bool {
        self.match.allSatisfy { scope.resolve($0.path) == $0.value }
    }

    /// Why the event does not match, or `nil` when it does.
    func firstMismatch(_ scope: RenderScope) -> String? {
        for condition in self.match {
            let actual = scope.resolve(condition.path)
            guard actual != condition.value else { continue }
            let found = actual.map { "\($0.messageExcerpt) (\($0.typeName))" } ?? "nothing"
            return "match.\(condition.path.text): wants \(condition.value.jsonText) (\(condition.value.typeName)), "
                + "the event has \(found)"
        }
        return nil
    }

    /// What this route makes of the event in `scope`, with its context (for a dead letter too: rendering a
    /// context never fails).
    func map(_ scope: inout RenderScope, epochSeconds: @Sendable () -> Int64) -> RouteMapping {
        var mapping: RouteMapping
        switch self.render(&scope, epochSeconds: epochSeconds) {
        case .success(let notifications):
            mapping = RouteMapping(
                route: self.name, app: self.app, outcome: .notifications(notifications), coalesces: self.coalesce,
                lane: self.lane)
        case .failure(let reason):
            mapping = RouteMapping(route: self.name, app: self.app, outcome: .deadLetter(reason), lane: self.lane)
        }
        if let context = self.context {
            mapping.context = context.render(&scope)
        }
        return mapping
    }

    private func deadLetter(_ code: DeadLetterReason.Code, _ field: String, _ message: String) -> DeadLetterReason {
        DeadLetterReason(code: code, route: self.name, field: field, message: message)
    }

    private func render(
        _ scope: inout RenderScope,
        epochSeconds: @Sendable () -> Int64
    ) -> Result<[MappedNotification], DeadLetterReason> {
        let tokens: [String]
        let tokenFault: Reason?
        var channelID: String?
        if let template = self.channelID {
            switch self.renderChannelID(template, &scope) {
            case .success(let value): channelID = value
            case .failure(let reason): return .failure(reason)
            }
            (tokens, tokenFault) = ([""], nil)
        } else {
            switch self.renderDeviceTokens(&scope) {
            case .success(let value): (tokens, tokenFault) = value
            case .failure(let reason): return .failure(reason)
            }
        }
        var expiration: Int64?
        switch self.renderExpiration(&scope, epochSeconds: epochSeconds) {
        case .success(let value): expiration = value
        case .failure(let reason): return .failure(reason)
        }
        // Apple requires apns-expiration on a broadcast; 0 ("try once, don't store") is the one value a channel
        // of either storage policy takes.
        if channelID != nil, expiration == nil { expiration = 0 }
        var collapseID: String?
        var collapseFault: Reason?
        if let template = self.collapseID {
            switch template.renderText(limit: Self.maximumHeaderBytes, scope: &scope) {
            case .complete(let text): collapseID = text.isEmpty ? nil : text
            case .missing: collapseID = nil
            case .overBudget(let partial):
                collapseID = partial
                collapseFault = .badCollapseId
            }
        }
        let payload: [UInt8]
        let payloadFault: Reason?
        switch self.renderPayload(&scope) {
        case .success(let value): (payload, payloadFault) = value
        case .failure(let reason): return .failure(reason)
        }
        var orderingKey: [UInt8]?
        if let source = self.orderingKey {
            switch self.renderOrderingKey(source, &scope) {
            case .success(let key): orderingKey = key
            case .failure(let reason): return .failure(reason)
            }
        }
        // NotificationValidation.validateHeaderValues, split by what varies: the topic and priority were checked
        // when the route compiled, expiration and collapse id are the event's, the token is each notification's.
        // Faults are reported in the order validate(_:) reports them: token, expiration, collapse id, payload.
        let eventFault =
            (expiration ?? 0) < 0
            ? .badExpirationDate : collapseFault ?? collapseID.flatMap(NotificationValidation.validateCollapseID)
        let event = scope.event
        var notifications: [MappedNotification] = []
        notifications.reserveCapacity(tokens.count)
        for (index, token) in tokens.enumerated() {
            let id = NotificationID.make(
                topic: event.source.topic, partition: event.source.partition, offset: event.source.offset,
                route: self.name,
                tokenIndex: index)
            let notification = Notification(
                deviceToken: token, topic: self.topic, pushType: self.pushType, priority: self.priority,
                expirationEpochSeconds: expiration, collapseID: collapseID, id: id, payload: payload,
                channelID: channelID)
            // A broadcast's channel ID was checked when it rendered (a bad one is a dead letter).
            let rejection =
                tokenFault ?? (channelID == nil ? NotificationValidation.validateDeviceTokenCharacters(token) : nil)
                ?? eventFault ?? payloadFault
            notifications.append(
                MappedNotification(
                    tokenIndex: index, notification: notification, localRejection: rejection,
                    payloadIsJSONObject: true, orderingKey: orderingKey))
        }
        return .success(notifications)
    }

    /// The ordering key's bytes. An event without one (a missing or null value, an empty key, no Kafka key) or
    /// with one longer than ``maximumOrderingKeyBytes`` is a dead letter naming `ordering_key`: sending it
    /// unordered would break the order the route promises.
    private func renderOrderingKey(
        _ source: OrderingKey, _ scope: inout RenderScope
    ) -> Result<[UInt8], DeadLetterReason> {
        let field = "ordering_key"
        let limit = Self.maximumOrderingKeyBytes
        switch source {
        case .kafkaKey:
            guard let key = scope.event.source.key, !key.isEmpty else {
                return .failure(
                    self.deadLetter(.missingValue, field, "the event has no Kafka key (ordering_key: key)"))
            }
            guard key.count <= limit else {
                return .failure(
                    self.deadLetter(
                        .invalidValue, field, "the Kafka key is \(key.count) bytes; an ordering key is at most \(limit)"
                    ))
            }
            return .success(key)
        case .template(let template):
            var bytes: [UInt8] = []
            var budget = RenderBudget(byteLimit: limit)
            switch template.render(into: &bytes, escaped: false, budget: &budget, scope: &scope) {
            case nil:
                guard !bytes.isEmpty else {
                    return .failure(self.deadLetter(.missingValue, field, "the ordering key rendered empty (missing)"))
                }
                return .success(bytes)
            case .missing(let path):
                let missing = MissingValue(path: path, value: scope.resolve(path))
                return .failure(
                    self.deadLetter(.missingValue, field, "\(missing.description), so the ordering key is missing"))
            case .overBudget:
                return .failure(
                    self.deadLetter(
                        .invalidValue, field,
                        "rendered more than \(limit) bytes (or its sections ran past their limit); an ordering key is "
                            + "at most \(limit)"))
            }
        }
    }

    /// The channel ID of a broadcast route: one string, from a single tag naming it or from text with tags.
    /// Anything that is not a channel ID — missing, null, not a string, empty, longer than
    /// ``maximumHeaderBytes`` or ``NotificationValidation/maximumChannelIDBytes``, with control characters, not
    /// base64 — is a dead letter naming `channel_id`: unlike a malformed device token, a malformed channel ID
    /// says nothing about a device to forget, and sending it would only buy APNs' `BadChannelId`.
    private func renderChannelID(
        _ template: TextTemplate, _ scope: inout RenderScope
    ) -> Result<String, DeadLetterReason> {
        let field = "channel_id"
        let text: String
        if let path = template.singleTag {
            switch scope.resolve(path) {
            case nil:
                return .failure(self.deadLetter(.missingValue, field, "\(path.text) is missing"))
            case .null?:
                return .failure(
                    self.deadLetter(.missingValue, field, "\(path.text) is null, so the channel ID is missing"))
            case .string(let value)?:
                guard value.utf8.count <= Self.maximumHeaderBytes else {
                    return .failure(
                        self.deadLetter(
                            .invalidValue, field,
                            "\(path.text) is \(value.utf8.count) bytes; a channel ID is at most "
                                + "\(NotificationValidation.maximumChannelIDBytes)"))
                }
                text = value
            case let value?:
                return .failure(
                    self.deadLetter(
                        .invalidValue, field,
                        "\(path.text) is \(value.typeNameWithArticle); expected a channel ID string"))
            }
        } else {
            switch template.renderText(limit: Self.maximumHeaderBytes, scope: &scope) {
            case .missing(let missing):
                return .failure(
                    self.deadLetter(.missingValue, field, "\(missing.description), so the channel ID is missing"))
            case .overBudget:
                return .failure(
                    self.deadLetter(
                        .invalidValue, field,
                        "rendered more than \(Self.maximumHeaderBytes) bytes; a channel ID is at most "
                            + "\(NotificationValidation.maximumChannelIDBytes)"))
            case .complete(let rendered):
                text = rendered
            }
        }
        switch NotificationValidation.validateChannelID(text) {
        case nil:
            return .success(text)
        case .missingChannelId?:
            return .failure(self.deadLetter(.missingValue, field, "the channel ID rendered empty (missing)"))
        case let reason?:
            return .failure(
                self.deadLetter(
                    .invalidValue, field,
                    "rendered \(JSONValue.string(text).messageExcerpt), which is not a channel ID (base64, at most "
                        + "\(NotificationValidation.maximumChannelIDBytes) bytes; APNs would answer \(reason.rawValue))"
                ))
        }
    }

    /// A device token taken from the event as it is, cut to ``maximumHeaderBytes`` when longer: such a token is
    /// rejected anyway (`BadDeviceToken`, longer than 200 characters), and its outcome need not carry it whole.
    private static func bounded(_ token: String) -> String {
        SafeText.bounded(token, maxBytes: Self.maximumHeaderBytes)
    }

    /// The tokens, and a fault that applies to them all (`BadDeviceToken` when the token template rendered past
    /// its limit, so the text is not the whole token).
    private func renderDeviceTokens(
        _ scope: inout RenderScope
    ) -> Result<(tokens: [String], fault: Reason?), DeadLetterReason> {
        let field = "device_tokens"
        guard let path = self.deviceTokens.singleTag else {
            switch self.deviceTokens.renderText(limit: Self.maximumHeaderBytes, scope: &scope) {
            case .missing(let missing):
                return .failure(
                    self.deadLetter(.missingValue, field, "\(missing.description), so the device token is missing"))
            case .overBudget(let partial):
                return .success(([partial], .badDeviceToken))
            case .complete(let token):
                guard !token.isEmpty else {
                    return .failure(self.deadLetter(.missingValue, field, "the device token rendered empty (missing)"))
                }
                return .success(([token], nil))
            }
        }
        switch scope.resolve(path) {
        case nil:
            return .failure(self.deadLetter(.missingValue, field, "\(path.text) is missing"))
        case .null?:
            return .failure(
                self.deadLetter(.missingValue, field, "\(path.text) is null, so the device token is missing"))
        case .string(let token)?:
            guard !token.isEmpty else {
                return .failure(self.deadLetter(.missingValue, field, "\(path.text) is an empty string (missing)"))
            }
            return .success(([Self.bounded(token)], nil))
        case .array(let elements)?:
            guard !elements.isEmpty else {
                return .failure(
                    self.deadLetter(
                        .missingValue, field, "\(path.text) is an empty array, so the device tokens are missing"))
            }
            var tokens: [String] = []
            tokens.reserveCapacity(elements.count)
            for (offset, element) in elements.enumerated() {
                guard case .string(let token) = element, !token.isEmpty else {
                    let what = element == .string("") ? "an empty string" : element.typeNameWithArticle
                    return .failure(
                        self.deadLetter(
                            .invalidValue, field, "\(path.text)[\(offset)] is \(what); every token must be a string"))
                }
                tokens.append(Self.bounded(token))
            }
            return .success((tokens, nil))
        case let value?:
            return .failure(
                self.deadLetter(
                    .invalidValue, field,
                    "\(path.text) is \(value.typeNameWithArticle); expected a string or an array of strings"))
        }
    }

    /// `apns-expiration`: `nil` to leave it out.
    ///
    /// A negative value is kept (the notification is then rejected locally with `BadExpirationDate`, as APNs
    /// would answer); a number that does not fit 64-bit epoch seconds is a dead letter naming the field
    /// (docs/templates.md, "Numbers out of range"); anything that is not an integer is a dead letter too.
    private func renderExpiration(
        _ scope: inout RenderScope,
        epochSeconds: @Sendable () -> Int64
    ) -> Result<Int64?, DeadLetterReason> {
        let field = "expiration"
        switch self.expiration {
        case .none:
            return .success(nil)
        case .ttl(let seconds):
            // `seconds` is at most 366 days; only a clock near the end of time could overflow, and then the
            // latest expiration there is stands for "store as long as APNs keeps anything".
            let (sum, overflow) = epochSeconds().addingReportingOverflow(seconds)
            return .success(overflow ? .max : sum)
        case .template(let template):
            let text: String
            if let path = template.singleTag {
                switch scope.resolve(path) {
                case nil, .null?: return .success(nil)
                case .integer(let value)?: return .success(value)
                case .double(let value)? where value.rounded(.towardZero) == value:
                    guard let seconds = Int64(exactly: value) else {
                        return .failure(
                            self.deadLetter(
                                .numberOutOfRange, field,
                                "number out of range at \(path.text): \(JSONValue.double(value).messageExcerpt) "
                                    + "does not fit 64-bit epoch seconds"))
                    }
                    return .success(seconds)
                case .string(let string)?: text = string
                case let value?:
                    return .failure(
                        self.deadLetter(
                            .invalidValue, field,
                            "\(path.text) is \(value.messageExcerpt); expected integer epoch seconds (0 or more)"))
                }
            } else {
                switch template.renderText(limit: Self.maximumHeaderBytes, scope: &scope) {
                case .missing: return .success(nil)
                case .complete(let rendered): text = rendered
                case .overBudget:
                    return .failure(
                        self.deadLetter(
                            .invalidValue, field,
                            "rendered more than \(Self.maximumHeaderBytes) bytes (or its sections ran past their "
                                + "limit); expected integer epoch seconds (0 or more)"))
                }
            }
            let unsigned = text.utf8.first == UInt8(ascii: "-") ? text.utf8.dropFirst() : text.utf8[...]
            let isInteger =
                !unsigned.isEmpty && unsigned.allSatisfy { $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }
            guard isInteger else {
                return .failure(
                    self.deadLetter(
                        .invalidValue, field,
                        "rendered \(JSONValue.string(text).messageExcerpt); expected integer epoch seconds (0 or more)"
                    ))
            }
            guard let value = Int64(text) else {
                return .failure(
                    self.deadLetter(
                        .numberOutOfRange, field,
                        "number out of range: rendered \(JSONValue.string(text).messageExcerpt), which does not fit "
                            + "64-bit epoch seconds"))
            }
            return .success(value)
        }
    }

    /// The payload's bytes, with `PayloadTooLarge` when rendering passed the push type's limit; the bytes are
    /// then what was rendered up to there, cut to one byte over the limit.
    private func renderPayload(
        _ scope: inout RenderScope
    ) -> Result<(bytes: [UInt8], fault: Reason?), DeadLetterReason> {
        let limit = self.maxPayloadBytes
        var bytes: [UInt8]
        switch self.payload {
        case .template(let template):
            bytes = []
            bytes.reserveCapacity(512)
            var budget = RenderBudget(byteLimit: limit)
            guard case .overBudget = template.render(into: &bytes, budget: &budget, scope: &scope) else {
                return .success((bytes, nil))
            }
        case .from(let path):
            switch scope.resolve(path) {
            case nil, .null?:
                return .failure(
                    self.deadLetter(
                        .missingValue, "payload_from", "\(path.text) is missing; expected the payload object"))
            case .object(let members)?:
                bytes = JSONValue.object(members).serialized()
                guard bytes.count > limit else { return .success((bytes, nil)) }
            case let value?:
                return .failure(
                    self.deadLetter(
                        .invalidValue, "payload_from",
                        "\(path.text) is \(value.typeNameWithArticle); expected the payload object"))
            }
        }
        if bytes.count > limit + 1 { bytes.removeSubrange((limit + 1)...) }
        return .success((bytes, .payloadTooLarge))
    }
}
