import APNSCore
import Foundation

/// The compiled routes: turns consumed events into notifications or dead-letter reasons (docs/configuration.md, docs/data-contract.md).
///
/// Compiling checks every route and parses every template once; mapping then does no parsing but the event's
/// own JSON. A `Router` is immutable and can be shared by any number of tasks.
package struct Router: Sendable {
    /// The routes as given, in order.
    package let specs: [RouteSpec]
    /// Every input topic, in the order routes first name them.
    package let inputTopics: [String]

    let routes: [CompiledRoute]
    /// Per topic, its routes (indices into `routes`) and the parts of an event they read.
    let routesByTopic: [String: (indices: [Int], projection: JSONProjection)]
    let epochSeconds: @Sendable () -> Int64

    /// Checks and compiles `routes`.
    ///
    /// - Parameters:
    ///   - routes: the routes, in configuration order.
    ///   - epochSeconds: the clock `ttl` counts from (seconds since 1970); tests inject a fixed one.
    /// - Throws: every problem found, in route order (see ``RouteCompileError``).
    package init(
        routes: [RouteSpec],
        epochSeconds: @escaping @Sendable () -> Int64 = Router.systemEpochSeconds
    ) throws(RouteCompileErrors) {
        var errors: [RouteCompileError] = []
        var compiled: [CompiledRoute] = []
        var firstIndexByName: [String: Int] = [:]
        for (index, spec) in routes.enumerated() {
            var diagnostics = RouteDiagnostics(routeIndex: index, routeName: spec.name)
            if !spec.name.isEmpty, let first = firstIndexByName[spec.name] {
                diagnostics.report(
                    .duplicateRouteName, at: "name", "the name \"\(spec.name)\" is already used by routes[\(first)]",
                    hint: "give every route its own name: it appears in outcomes, dead letters and metrics")
            } else {
                firstIndexByName[spec.name] = index
            }
            let route = CompiledRoute(compiling: spec, diagnostics: &diagnostics)
            errors.append(contentsOf: diagnostics.errors)
            if let route { compiled.append(route) }
        }
        guard errors.isEmpty else { throw RouteCompileErrors(errors: errors) }

        var topics: [String] = []
        var indices: [String: [Int]] = [:]
        for (index, route) in compiled.enumerated() {
            if indices[route.inputTopic] == nil { topics.append(route.inputTopic) }
            indices[route.inputTopic, default: []].append(index)
        }
        self.specs = routes
        self.inputTopics = topics
        self.routes = compiled
        self.routesByTopic = indices.mapValues { indices in
            (indices, JSONProjection(paths: indices.flatMap { compiled[$0].readPaths }))
        }
        self.epochSeconds = epochSeconds
    }

    /// The system clock in whole seconds since 1970.
    @Sendable package static func systemEpochSeconds() -> Int64 {
        Int64(Date().timeIntervalSince1970)
    }

    /// The names of the routes reading `topic`, in configuration order.
    package func routes(forTopic topic: String) -> [String] {
        (self.routesByTopic[topic]?.indices ?? []).map { self.routes[$0].name }
    }

    /// What every route of the event's topic makes of it, in route order; routes whose `match` fails are left
    /// out, so an empty array means the event matched no route.
    ///
    /// An event whose value is not JSON (or is a tombstone) cannot be matched by any route: it becomes one dead
    /// letter with an empty route name (data contract: one dead letter per event, never one per route, so a
    /// large unreadable event is not multiplied by the number of routes), in the lane of the topic's first route.
    package func map(event: SourceEvent) -> [RouteMapping] {
        guard let (indices, projection) = self.routesByTopic[event.source.topic] else { return [] }
        let document: JSONDocument
        do {
            document = try Self.parseValue(of: event, projection: projection)
        } catch {
            guard let first = indices.first else { return [] }
            return [
                RouteMapping(
                    route: "", app: nil,
                    outcome: .deadLetter(
                        DeadLetterReason(code: error.code, route: "", field: nil, message: error.message)),
                    lane: self.routes[first].lane
                )
            ]
        }
        var scope = RenderScope(event: event, document: document)
        var mappings: [RouteMapping] = []
        for index in indices {
            let route = self.routes[index]
            guard route.matches(scope) else { continue }
            mappings.append(route.map(&scope, epochSeconds: self.epochSeconds))
        }
        return mappings
    }

    /// What the route named `name` makes of `event`, for `pushbridge render`: whether it matches, and if so its
    /// mapping. `nil` when there is no such route. The event's topic is not checked, so any input can be tried
    /// against any route.
    package func trial(of event: SourceEvent, route name: String) -> RouteTrial? {
        guard let route = self.routes.first(where: { $0.name == name }) else { return nil }
        let document: JSONDocument
        do {
            document = try Self.parseValue(of: event, projection: .everything)
        } catch {
            // As in `map(event:)`: an unreadable event is one dead letter that no route owns.
            return .mapped(
                RouteMapping(
                    route: "", app: nil,
                    outcome: .deadLetter(
                        DeadLetterReason(code: error.code, route: "", field: nil, message: error.message))
                ))
        }
        var scope = RenderScope(event: event, document: document)
        if let mismatch = route.firstMismatch(scope) {
            return .notMatched(mismatch)
        }
        return .mapped(route.map(&scope, epochSeconds: self.epochSeconds))
    }

    /// Why an event's value cannot be read at all.
    private struct Unreadable: Error {
        var code: DeadLetterReason.Code
        var message: String
    }

    private static func parseValue(
        of event: SourceEvent,
        projection: JSONProjection
    ) throws(Unreadable) -> JSONDocument {
        guard let value = event.value else {
            throw Unreadable(code: .notJSON, message: "the event has no value (tombstone); expected a JSON document")
        }
        do {
            return try JSONDocument(parsing: value, projection: projection)
        } catch let error where error.code == .numberOutOfRange {
            // Valid JSON, but a number no JSON value here can hold: say where, so the event can be fixed.
            throw Unreadable(
                code: .numberOutOfRange,
                message: "number out of range at \(error.pathText) (byte \(error.byteOffset)): its magnitude is "
                    + "beyond 1.8e308, the largest a number may have")
        } catch {
            throw Unreadable(code: .notJSON, message: "the event value is not JSON: \(error)")
        }
    }
}

/// The answer of ``Router/trial(of:route:)``.
package enum RouteTrial: Sendable {
    /// The route's `match` rejects the event; the text says which field differs and how.
    case notMatched(String)
    /// The route matches (or the event is not JSON); this is what it makes of the event.
    case mapped(RouteMapping)
}
