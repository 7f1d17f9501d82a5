import APNSCore
import Routing

/// Sends notifications (APNs over HTTP/2, in production; or the `log` sender). Another sender plugs in by
/// conforming to this.
package protocol NotificationSender: Sendable {
    /// Sends `notification` with the credentials of `app` (`nil`: the default `apns` block) and returns
    /// APNs' answer. It never throws: every fault is an `APNSResult` (`.failed` when APNs gave no answer).
    func send(_ notification: Notification, app: String?) async -> APNSResult
    /// Sends `notification` and calls `completion` once with what ``send(_:app:)`` would return, from any thread,
    /// without a task per notification where the sender can.
    func send(_ notification: Notification, app: String?, completion: @escaping @Sendable (APNSResult) -> Void)
    /// ``send(_:app:completion:)`` for several notifications at once, so a sender can hand them over together.
    func send(contentsOf batch: [SendRequest])
}

/// One notification for ``NotificationSender/send(contentsOf:)``.
package struct SendRequest: Sendable {
    package var notification: Notification
    package var app: String?
    package var completion: @Sendable (APNSResult) -> Void

    package init(notification: Notification, app: String?, completion: @escaping @Sendable (APNSResult) -> Void) {
        self.notification = notification
        self.app = app
        self.completion = completion
    }
}

extension NotificationSender {
    /// Runs ``send(_:app:)`` in a task.
    package func send(_ notification: Notification, app: String?, completion: @escaping @Sendable (APNSResult) -> Void)
    {
        Task { completion(await self.send(notification, app: app)) }
    }

    /// Sends them one by one.
    package func send(contentsOf batch: [SendRequest]) {
        for request in batch {
            self.send(request.notification, app: request.app, completion: request.completion)
        }
    }
}
