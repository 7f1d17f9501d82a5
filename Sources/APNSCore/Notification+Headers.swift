/// How a ``Notification`` is written on the wire: the request path and the `apns-*` headers, in the order
/// they are sent. The client, `pushbridge render` and the simulator's tests all use this one description.
extension Notification {
    /// `:path`: `/3/device/<token>` (Apple: *Sending notification requests to APNs*).
    public var path: String { "/3/device/\(self.deviceToken)" }

    /// The `apns-*` request headers; optional ones are left out when their value is `nil`.
    ///
    /// `authorization` is not among them: it belongs to the connection's credentials, not the notification.
    public var apnsHeaders: [(name: String, value: String)] {
        var headers: [(name: String, value: String)] = [
            ("apns-push-type", self.pushType.rawValue),
            ("apns-topic", self.topic),
            ("apns-priority", String(self.priority.rawValue)),
            ("apns-id", self.apnsID),
        ]
        if let expiration = self.expirationEpochSeconds {
            headers.append(("apns-expiration", String(expiration)))
        }
        if let collapseID = self.collapseID {
            headers.append(("apns-collapse-id", collapseID))
        }
        return headers
    }
}
