/// One problem in one route's specification.
package struct RouteCompileError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What kind of problem it is.
    package enum Code: String, Sendable, Hashable {
        /// A required field is empty or absent.
        case missingField
        /// A template does not parse, or uses a Mustache feature routes do not support.
        case brokenTemplate
        /// `push_type` names no APNs push type.
        case unknownPushType
        /// `priority` is not 10, 5 or 1.
        case invalidPriority
        /// The push type does not allow the priority (background with 10).
        case priorityNotAllowed
        /// Two fields that exclude each other are both given (`payload` and `payload_from`, `expiration` and
        /// `ttl`), or neither of two required alternatives.
        case conflictingFields
        /// `device_tokens` has no tag, so every event would go to one fixed device.
        case deviceTokensNotTemplate
        /// A value has the wrong form (a non-object payload, a non-positive `ttl`, a malformed path, ...).
        case invalidValue
        /// Two routes share a name.
        case duplicateRouteName
    }

    /// What kind of problem it is.
    package var code: Code
    /// The route's position in the list (0-based).
    package var routeIndex: Int
    /// The route's name as given (possibly empty).
    package var routeName: String
    /// Where in the route, with YAML key names: `push_type`, `payload.aps.alert.title`, `match.type`,
    /// `payload.items[2]`. Empty for the route as a whole.
    package var keyPath: String
    /// What is wrong.
    package var message: String
    /// How to fix it, when there is something useful to say.
    package var hint: String?

    /// Creates an error.
    package init(code: Code, routeIndex: Int, routeName: String, keyPath: String, message: String, hint: String?) {
        self.code = code
        self.routeIndex = routeIndex
        self.routeName = routeName
        self.keyPath = keyPath
        self.message = message
        self.hint = hint
    }

    /// `routes[1] (order-shipped): payload.aps.alert.title: ... (hint: ...)`.
    package var description: String {
        var text = "routes[\(self.routeIndex)]"
        if !self.routeName.isEmpty { text += " (\(self.routeName))" }
        if !self.keyPath.isEmpty { text += ": \(self.keyPath)" }
        text += ": \(self.message)"
        if let hint = self.hint { text += " (hint: \(hint))" }
        return text
    }
}

/// Every problem found in a list of routes: the compiler reports them all at once, not the first.
package struct RouteCompileErrors: Error, Sendable, Hashable, CustomStringConvertible {
    /// The problems, in route order and, within a route, in field order.
    package var errors: [RouteCompileError]

    /// Creates the collection.
    package init(errors: [RouteCompileError]) {
        self.errors = errors
    }

    package var description: String {
        self.errors.map(\.description).joined(separator: "\n")
    }
}
