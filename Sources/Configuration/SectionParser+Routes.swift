import Routing
import SafeText
import Yams

extension SectionParser {
    static let routeKeys = [
        "name", "input_topic", "app", "match", "device_tokens", "topic", "push_type", "priority", "expiration",
        "ttl", "collapse_id", "payload", "payload_from", "channel_id", "ordering_key", "coalesce", "context",
        "lane",
    ]

    /// The routes of `routes:` with, for each, its index in the YAML list. A route that is not even a mapping
    /// is left out (its problem is reported); every other route is returned, even with problems, so the
    /// route compiler can report its own findings too.
    func routes(
        _ value: ConfigValue, appNames: Set<String>, laneNames: Set<String> = []
    ) -> [(index: Int, spec: RouteSpec)]? {
        guard let elements = value.sequence() else {
            return nil
        }
        if elements.isEmpty {
            value.report(.missingKey, "no routes", hint: "add at least one route; every input topic needs one")
            return nil
        }
        var specs: [(index: Int, spec: RouteSpec)] = []
        for (index, element) in elements.enumerated() {
            if let spec = self.route(element, appNames: appNames, laneNames: laneNames) {
                specs.append((index, spec))
            }
        }
        return specs
    }

    func route(_ value: ConfigValue, appNames: Set<String>, laneNames: Set<String> = []) -> RouteSpec? {
        guard let mapping = value.mapping(known: Self.routeKeys) else {
            return nil
        }
        let name =
            mapping.required("name", hint: "it names the route in outcomes, dead letters and metrics")?
            .nonEmptyString() ?? ""
        let inputTopic =
            mapping.required("input_topic", hint: "the Kafka topic this route consumes")
            .flatMap { self.topicName($0) } ?? ""
        let app = mapping["app"].flatMap { self.appReference($0, appNames: appNames) }
        let match = mapping["match"].flatMap(self.match) ?? []
        // A broadcast route names a channel instead of device tokens; the route compiler refuses both together.
        // A channel_id of the wrong type is reported here; "" keeps the route a broadcast one for the compiler.
        let channelID = mapping["channel_id"].map { $0.string() ?? "" }
        let deviceTokens =
            mapping["channel_id"] != nil
            ? mapping["device_tokens"]?.string() ?? ""
            : mapping.required(
                "device_tokens",
                hint: "a tag naming the token or an array of tokens, e.g. \"{{customer.apns_tokens}}\" (or, for a "
                    + "Live Activity broadcast, channel_id instead)"
            )?.string() ?? ""
        let topic = mapping.required("topic", hint: "the app's bundle ID, e.g. com.example.shop")?.string() ?? ""
        let pushType = mapping["push_type"]?.string() ?? "alert"
        let priority = mapping["priority"]?.integer(in: Int.min...Int.max)
        let expiration = mapping["expiration"]?.string()
        let ttl = mapping["ttl"]?.duration(maximum: Bounds.ttl)
        let collapseID = mapping["collapse_id"]?.string()
        let payload = mapping["payload"].map(self.json)
        let payloadFrom = mapping["payload_from"]?.string()
        // An empty ordering_key (also `${VAR:-}`) is kept as given: the route compiler says it is empty, rather
        // than the route silently losing its order.
        let orderingKey = mapping["ordering_key"]?.string()
        let coalesce = mapping["coalesce"]?.boolean() ?? false
        let context = mapping["context"].flatMap(self.context) ?? []
        let lane = mapping["lane"].flatMap { self.laneReference($0, laneNames: laneNames) } ?? nil
        return RouteSpec(
            name: name, inputTopic: inputTopic, app: app, match: match, deviceTokens: deviceTokens, topic: topic,
            pushType: pushType, priority: priority, expiration: expiration, ttl: ttl, collapseID: collapseID,
            payload: payload, payloadFrom: payloadFrom, channelID: channelID,
            orderingKey: orderingKey, coalesce: coalesce, context: context, lane: lane
        )
    }

    /// `app:` must name an entry under `apps:`.
    func appReference(_ value: ConfigValue, appNames: Set<String>) -> String? {
        guard let name = value.optionalString()?.trimmingWhitespace() else {
            return nil
        }
        guard appNames.contains(name) else {
            let known = appNames.sorted()
            var hint: String
            if known.isEmpty {
                hint = "there is no apps: section; leave app out to use the apns block"
            } else {
                hint = "apps: defines \(known.joined(separator: ", "))"
                if let suggestion = Suggestion.closest(to: name, among: known) {
                    hint = "did you mean \(suggestion)? " + hint
                }
            }
            value.report(.unknownApp, "\(value.describe(name)) is not an app under apps:", hint: hint)
            return nil
        }
        return name
    }

    /// `match:`: dotted path → the value it must equal (any YAML value, compared as JSON).
    func match(_ value: ConfigValue) -> [(path: String, value: JSONValue)]? {
        guard let mapping = value.mapping(known: nil) else {
            return nil
        }
        return mapping.entries.map { entry in (path: entry.key, value: self.json(entry.value)) }
    }

    /// A YAML value as JSON, `${VAR}` expanded in every scalar.
    ///
    /// Quoted scalars are strings. A plain scalar keeps its YAML type (`10` a number, `true` a boolean, `null`
    /// null); when `${VAR}` expansion changed it, the expanded text decides its type the same way, so
    /// `badge: ${BADGE:-1}` is the number 1.
    func json(_ value: ConfigValue) -> JSONValue {
        switch value.node {
        case .mapping:
            guard let mapping = value.mapping(known: nil) else {
                return .null
            }
            return .object(mapping.entries.map { (key: $0.key, value: self.json($0.value)) })
        case .sequence:
            return .array((value.sequence() ?? []).map(self.json))
        case .scalar(let scalar):
            guard let expanded = value.expand(scalar.string) else {
                return .null
            }
            guard scalar.style == .plain else {
                return .string(expanded)
            }
            if expanded != scalar.string {
                return Self.plainJSON(expanded)
            }
            switch value.tagName {
            case .null: return .null
            case .bool: return value.node.bool.map(JSONValue.bool) ?? .string(expanded)
            case .int: return value.node.int.map { .integer(Int64($0)) } ?? .string(expanded)
            case .float: return value.node.float.map(JSONValue.double) ?? .string(expanded)
            default: return .string(expanded)
            }
        }
    }

    /// The JSON type of plain text produced by `${VAR}` expansion.
    static func plainJSON(_ text: String) -> JSONValue {
        let trimmed = text.trimmingWhitespace()
        switch trimmed {
        case "", "~", "null", "Null", "NULL": return .null
        case "true", "True", "TRUE": return .bool(true)
        case "false", "False", "FALSE": return .bool(false)
        default:
            if let integer = Int64(trimmed) {
                return .integer(integer)
            }
            if let double = Double(trimmed), trimmed.contains(where: { $0.isNumber }) {
                return .double(double)
            }
            return .string(text)
        }
    }

    /// Compiles the routes and turns the compiler's findings into problems at the routes' lines. A finding at
    /// a key path that already has a problem is dropped (the loader said it first).
    func compile(_ routes: [(index: Int, spec: RouteSpec)]) -> Router? {
        do {
            return try Router(routes: routes.map(\.spec))
        } catch {
            let reported = Set(self.reader.problems.map(\.path))
            for finding in error.errors {
                let index = routes.indices.contains(finding.routeIndex) ? routes[finding.routeIndex].index : 0
                let path = "routes[\(index)]" + (finding.keyPath.isEmpty ? "" : ".\(finding.keyPath)")
                if reported.contains(path) {
                    continue
                }
                self.reader.report(
                    .route, at: path, line: self.reader.line(of: path), finding.message, hint: finding.hint)
            }
            return nil
        }
    }

    /// A broadcast route (`channel_id`) must send through an HTTP/2 app: the binary protocol has no broadcast.
    func checkBroadcastApps(
        of routes: [(index: Int, spec: RouteSpec)], apns: APNSSettings, apps: [String: APNSSettings]
    ) {
        for (index, spec) in routes where spec.channelID != nil {
            let settings = spec.app.map { apps[$0] } ?? apns
            guard settings?.providerProtocol == .binary else { continue }
            let path = "routes[\(index)].channel_id"
            self.reader.report(
                .invalidValue, at: path, line: self.reader.line(of: path),
                "a broadcast route cannot send through app \(spec.app ?? "apns"), which uses protocol: binary",
                hint: "broadcast channels are an HTTP/2 API: use an app with protocol: http2 (the default), or "
                    + "send to device_tokens"
            )
        }
    }

    /// Input topics must not be one of the bridge's own output topics (it would consume its own records).
    func checkTopics(of routes: [(index: Int, spec: RouteSpec)], against outcomes: OutcomeTopics) {
        let outputs = [outcomes.outcomes, outcomes.invalidTokens, outcomes.deadLetters]
        for (index, spec) in routes where outputs.contains(spec.inputTopic) {
            let path = "routes[\(index)].input_topic"
            self.reader.report(
                .invalidValue, at: path, line: self.reader.line(of: path),
                "\"\(spec.inputTopic)\" is one of the bridge's output topics (outcomes:)",
                hint: "a route must not consume the records the bridge itself writes"
            )
        }
    }
}
