/// How a ``Notification`` is written on the wire: the request path and the `apns-*` headers, in the order
/// they are sent. The client, `pushbridge render` and the simulator's tests all use this one description.
extension Notification {
    /// `:path`: `/3/device/<token>` (Apple: *Sending notification requests to APNs*).
    public var path: String { "/3/device/\(self.deviceToken)" }

    /// The `apns-*` request headers; optional ones are left out when their value is `nil`.
    ///
    /// `authorization` is not among them: it belongs to the connection's credentials, not the notification.
    public var apnsHeaders: [(name: String, value: String)] {
        var headers: [(name: String, value: String)] = []
        headers.reserveCapacity(6)
        self.forEachAPNSHeader { headers.append((name: $0, value: $1)) }
        return headers
    }

    /// Calls `body` with each header of ``apnsHeaders``, in order, without making the array (the client
    /// builds its request's header list straight from here, once per notification).
    public func forEachAPNSHeader(_ body: (_ name: String, _ value: String) -> Void) {
        body("apns-push-type", self.pushType.rawValue)
        body("apns-topic", self.topic)
        body("apns-priority", String(self.priority.rawValue))
        body("apns-id", self.apnsID)
        if let expiration = self.expirationEpochSeconds {
            body("apns-expiration", String(expiration))
        }
        if let collapseID = self.collapseID {
            body("apns-collapse-id", collapseID)
        }
    }
}
