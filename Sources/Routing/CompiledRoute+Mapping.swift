import APNSCore
import SafeText

// How a compiled route maps an event: whether it matches, and the notifications (or dead letters) it renders.

extension CompiledRoute {
    /// Whether every `match` condition holds for the event.
    func matches(_ scope: RenderScope) -> Bool {
        self.match.allSatisfy { scope.value(at: $0.path, equals: $0.value) }
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
        let rendered = self.render(&scope, epochSeconds: epochSeconds)
        // The context after the notifications, and the mapping made once with it: a mapping made first and then
        // given its context was copied twice on the way out (a retain and a release of each of its parts).
        let context = self.context?.render(&scope)
        switch rendered {
        case .success(let notifications):
            return RouteMapping(
                route: self.name, app: self.app, outcome: .notifications(notifications), coalesces: self.coalesce,
                context: context, lane: self.lane)
        case .failure(let reason):
            return RouteMapping(
                route: self.name, app: self.app, outcome: .deadLetter(reason), context: context, lane: self.lane)
        }
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
        // NotificationValidation.validate, split by what varies: the topic and priority were checked when the route
        // compiled, expiration and collapse id are the event's (validateEventFields), the token is each
        // notification's. Faults come in validate's order: token, expiration, collapse id, payload.
        let eventFault =
            NotificationValidation.validateEventFields(expirationEpochSeconds: expiration, collapseID: collapseID)
            ?? collapseFault
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
            guard let located = scope.locate(path), !scope.isNull(located) else {
                return .failure(
                    self.deadLetter(
                        .missingValue, "payload_from", "\(path.text) is missing; expected the payload object"))
            }
            // Written from where it is; only a value of the wrong type is built, for its type's name.
            guard scope.isObject(located) else {
                return .failure(
                    self.deadLetter(
                        .invalidValue, "payload_from",
                        "\(path.text) is \(scope.value(located).typeNameWithArticle); expected the payload object"))
            }
            bytes = []
            scope.serialize(located, into: &bytes)
            guard bytes.count > limit else { return .success((bytes, nil)) }
        }
        if bytes.count > limit + 1 { bytes.removeSubrange((limit + 1)...) }
        return .success((bytes, .payloadTooLarge))
    }
}
