import Routing
import SafeText

// `outcomes.key`, `outcomes.forward_headers` and a route's `context` (docs/configuration.md, "Context on records").

extension SectionParser {
    /// `outcomes.key`: `device_token`, `source_key`, `notification_id` or `context.<name>`.
    func outcomeKey(_ value: ConfigValue) -> OutcomeKey? {
        guard let text = value.string()?.trimmingWhitespace() else { return nil }
        if let key = OutcomeKey(text) {
            guard case .context(let name) = key, name.isEmpty else { return key }
            value.report(
                .invalidValue, "\(value.describe(text)) names no context entry",
                hint: "write context.<name> with the name of an entry of the routes' context, e.g. context.campaign")
            return nil
        }
        var hint = "allowed: \(OutcomeKey.choices.joined(separator: ", "))"
        let known = Array(OutcomeKey.choices.dropLast())
        if let suggestion = Suggestion.closest(to: text, among: known) {
            hint = "did you mean \(suggestion)? " + hint
        } else if !text.contains(".") {
            hint += "; to key by a context entry, write context.\(text)"
        }
        value.report(.invalidValue, "\(value.describe(text)) is not a record key", hint: hint)
        return nil
    }

    /// `outcomes.forward_headers`: a list of at most ``HeaderForwarding/maximumNames`` distinct header names, each
    /// of visible ASCII, at most ``HeaderForwarding/maximumNameBytes`` long and not one of the bridge's own
    /// (`pushbridge-*`).
    func forwardHeaders(_ value: ConfigValue) -> HeaderForwarding? {
        guard let elements = value.sequence() else { return nil }
        var valid = true
        if elements.count > HeaderForwarding.maximumNames {
            value.report(
                .invalidValue,
                "\(elements.count) headers; at most \(HeaderForwarding.maximumNames) may be forwarded",
                hint: "forward the headers a reader of the records needs, such as traceparent and tracestate")
            valid = false
        }
        var names: [String] = []
        for element in elements {
            guard let name = element.string()?.trimmingWhitespace() else {
                valid = false
                continue
            }
            if let problem = Self.headerNameProblem(name) {
                element.report(.invalidValue, problem.message, hint: problem.hint)
                valid = false
            } else if names.contains(name) {
                element.report(.duplicateKey, "\(element.describe(name)) is listed twice", hint: "list it once")
                valid = false
            }
            names.append(name)
        }
        return valid ? HeaderForwarding(names: names) : nil
    }

    private static func headerNameProblem(_ name: String) -> (message: String, hint: String)? {
        let hint = "write a Kafka header name as the producer sets it, e.g. traceparent"
        if name.isEmpty {
            return ("a header name must not be empty", hint)
        }
        if name.utf8.count > HeaderForwarding.maximumNameBytes {
            return ("the header name is \(name.utf8.count) bytes; at most \(HeaderForwarding.maximumNameBytes)", hint)
        }
        if !name.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) {
            return (
                "\"\(SafeText.excerpt(name, maxBytes: 60))\" is not a header name of visible ASCII characters", hint
            )
        }
        if name.lowercased().hasPrefix("pushbridge-") {
            return (
                "\(name) is a header the bridge writes itself, not one it can forward",
                "remove it; the bridge's records carry their pushbridge-* headers anyway"
            )
        }
        return nil
    }

    /// A route's `context`: name → value (any YAML value, as JSON; the route compiler checks the entries).
    func context(_ value: ConfigValue) -> [(name: String, value: JSONValue)]? {
        guard let mapping = value.mapping(known: nil) else { return nil }
        return mapping.entries.map { entry in (name: entry.key, value: self.json(entry.value)) }
    }

    /// `outcomes.key: context.<name>` needs the entry in the context of every route: a record of a route without
    /// it would have no key, and land on a partition the team's join does not read. One problem at `outcomes.key`
    /// names every route that lacks it.
    func checkOutcomeKey(of routes: [(index: Int, spec: RouteSpec)], against outcomes: OutcomeTopics) {
        guard case .context(let name) = outcomes.key else { return }
        let lacking = routes.filter { route in !route.spec.context.contains { $0.name == name } }
        guard !lacking.isEmpty else { return }
        let listed = lacking.prefix(5).map { "routes[\($0.index)] (\($0.spec.name))" }.joined(separator: ", ")
        let more = lacking.count > 5 ? " and \(lacking.count - 5) more" : ""
        var hint =
            "add `\(name)` to the context of every route (a constant, e.g. `\(name): \"\"`, where its events have "
            + "none), or choose another outcomes.key (device_token, source_key, notification_id)"
        let names = Set(routes.flatMap { $0.spec.context.map(\.name) }).sorted()
        if let suggestion = Suggestion.closest(to: name, among: names), suggestion != name {
            hint = "did you mean context.\(suggestion)? " + hint
        }
        self.reader.report(
            .invalidValue, at: "outcomes.key", line: self.reader.line(of: "outcomes.key"),
            "context.\(name) names no context entry of \(listed)\(more)", hint: hint)
    }
}
