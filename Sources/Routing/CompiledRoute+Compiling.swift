import APNSCore
import SafeText

// How a route's parts compile (its initializer, in CompiledRoute.swift, calls these): each problem goes to the
// route's diagnostics with its key.

extension CompiledRoute {
    static func compileTemplate(
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

    static func compileDeviceTokens(_ source: String, diagnostics: inout RouteDiagnostics) -> TextTemplate {
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
    static func compileChannelID(
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
    static func compileOrderingKey(_ source: String?, diagnostics: inout RouteDiagnostics) -> OrderingKey? {
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

    static func compilePushType(_ text: String, diagnostics: inout RouteDiagnostics) -> PushType? {
        if let pushType = PushType(rawValue: text) { return pushType }
        let names = PushType.allCases.map(\.rawValue)
        let suggestion = Suggestion.closest(to: text, among: names)
        diagnostics.report(
            .unknownPushType, at: "push_type", "unknown push type \"\(text)\"",
            hint: suggestion.map { "did you mean \"\($0)\"?" } ?? "use one of: \(names.joined(separator: ", "))")
        return nil
    }

    static func compilePriority(
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

    static func compileExpiration(_ spec: RouteSpec, diagnostics: inout RouteDiagnostics) -> Expiration {
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

    static func compilePayload(_ spec: RouteSpec, diagnostics: inout RouteDiagnostics) -> Payload {
        let fallback = Payload.template(PayloadTemplate(constant: Array("{}".utf8)))
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
}
