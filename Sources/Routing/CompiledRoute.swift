import APNSCore

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

/// What templates are rendered against: the event's JSON plus `_kafka` and `_headers`.
struct RenderContext {
    let event: RoutingEvent
    let document: JSONValue
}

/// One route, checked and with its templates parsed.
struct CompiledRoute: Sendable {
    let name: String
    let inputTopic: String
    let app: String?

    /// Compiles `spec`, reporting every problem to `diagnostics`; `nil` when there was any.
    init?(compiling spec: RouteSpec, diagnostics: inout RouteDiagnostics) {
        self.name = spec.name
        self.inputTopic = spec.inputTopic
        self.app = spec.app
    }

    func matches(_ document: JSONValue) -> Bool {
        true
    }

    func firstMismatch(_ document: JSONValue) -> String? {
        nil
    }

    func map(_ context: RenderContext, now: @Sendable () -> Int64) -> RouteMapping {
        RouteMapping(route: self.name, app: self.app, outcome: .notifications([]))
    }
}
