import APNSCore
import Routing

/// Sends notifications (APNs over HTTP/2 or the binary protocol, in production; or the `log` sender). Another sender
/// plugs in by conforming to this.
///
/// One requirement, the batch: it is the path of the bridge's hot loop, and the one-notification forms below are
/// written once on top of it, so every sender (and every test's sender) is driven the way production drives it.
package protocol NotificationSender: Sendable {
    /// Sends each notification of `batch` with the credentials of its `app` (`nil`: the default `apns` block) and
    /// calls its completion once with APNs' answer: from any thread, possibly before this returns, never twice.
    /// Every fault is an `APNSResult` (`.failed` when APNs gave no answer). It must not block: what needs waiting
    /// (a connection to open, a resend) goes on in the sender's own tasks or event loops.
    func send(contentsOf batch: consuming [SendRequest])
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
    /// ``send(contentsOf:)`` for one notification.
    package func send(_ notification: Notification, app: String?, completion: @escaping @Sendable (APNSResult) -> Void)
    {
        self.send(contentsOf: [SendRequest(notification: notification, app: app, completion: completion)])
    }

    /// Sends `notification` and waits for its answer (``APNSCore/APNSResult/awaiting(_:)``: a task cancelled meanwhile
    /// gets `.failed(.connectionLost)` at once, and the pipeline then leaves the event unfinished and uncommitted).
    package func send(_ notification: Notification, app: String?) async -> APNSResult {
        await APNSResult.awaiting { self.send(notification, app: app, completion: $0) }
    }
}
