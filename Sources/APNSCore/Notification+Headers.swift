/// How a ``Notification`` is written on the wire: the request path and the `apns-*` headers, in the order
/// they are sent. The client, `pushbridge render` and the simulator's tests all use this one description.
extension Notification {
    /// `:path`: `/3/device/<token>` (Apple: *Sending notification requests to APNs*), or for a broadcast
    /// `/4/broadcasts/apps/<bundle ID>` (Apple: *Sending broadcast push notification requests to APNs*).
    package var path: String {
        if self.channelID != nil { return "/4/broadcasts/apps/\(self.bundleID)" }
        return "/3/device/\(self.deviceToken)"
    }

    /// The `apns-*` request headers; optional ones are left out when their value is `nil`.
    ///
    /// `authorization` is not among them: it belongs to the connection's credentials, not the notification.
    package var apnsHeaders: [(name: String, value: String)] {
        var headers: [(name: String, value: String)] = []
        headers.reserveCapacity(6)
        self.forEachAPNSHeader { headers.append((name: $0, value: $1)) }
        return headers
    }

    /// Calls `body` with each header of ``apnsHeaders``, in order, without making the array.
    package func forEachAPNSHeader(_ body: (_ name: String, _ value: String) -> Void) {
        self.forEachAPNSField { name, value, _ in body(name.description, value) }
    }

    /// Calls `body` with each header of ``apnsHeaders``, in order, its name as the constant it is, and whether its
    /// value differs from request to request (`apns-id`, a broadcast's `apns-request-id`, `apns-expiration`,
    /// `apns-collapse-id`: Apple's HPACK guidance keeps only their names in the tables). The client writes its
    /// request's header block straight from here, once per notification.
    ///
    /// A broadcast carries Apple's broadcast headers instead (Apple: *Sending broadcast push notification requests
    /// to APNs*): `apns-push-type`, `apns-priority`, `apns-request-id` (the notification's id: Apple's table names
    /// this header for broadcasts, and echoes it in the answer), `apns-expiration` (required there: `0` when the
    /// notification has none) and `apns-channel-id`. No `apns-topic` (the bundle ID is in the path; Apple's table
    /// and examples have none) and no `apns-collapse-id` (not in Apple's table; routes refuse it).
    package func forEachAPNSField(_ body: (_ name: StaticString, _ value: String, _ variesPerRequest: Bool) -> Void) {
        if let channelID = self.channelID {
            body("apns-push-type", self.pushType.rawValue, false)
            body("apns-priority", String(self.priority.rawValue), false)
            body("apns-request-id", self.apnsID, true)
            body("apns-expiration", String(self.expirationEpochSeconds ?? 0), true)
            body("apns-channel-id", channelID, false)
            return
        }
        body("apns-push-type", self.pushType.rawValue, false)
        body("apns-topic", self.topic, false)
        body("apns-priority", String(self.priority.rawValue), false)
        body("apns-id", self.apnsID, true)
        if let expiration = self.expirationEpochSeconds {
            body("apns-expiration", String(expiration), true)
        }
        if let collapseID = self.collapseID {
            body("apns-collapse-id", collapseID, true)
        }
    }
}
