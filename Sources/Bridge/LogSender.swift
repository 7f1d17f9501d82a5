import APNSCore
import BridgeCore
import Logging

/// The `log` sender: writes each notification to the log instead of sending it, and reports it delivered.
/// For trying routes and templates end to end without Apple credentials.
package struct LogSender: NotificationSender {
    private let logger: Logger

    /// Creates a sender that logs at `notice` level through `logger`.
    package init(logger: Logger) {
        self.logger = logger
    }

    /// Logs each and answers at once, on the caller's thread: there is nothing to wait for.
    package func send(contentsOf batch: consuming [SendRequest]) {
        for request in batch {
            request.completion(self.logged(request.notification, app: request.app))
        }
    }

    private func logged(_ notification: Notification, app: String?) -> APNSResult {
        self.logger.notice(
            "Notification (log sender, not sent)",
            metadata: [
                "apns.app": "\(app ?? "default")",
                notification.isBroadcast ? "apns.channel" : "apns.token": "\(notification.destinationForLog)",
                "apns.topic": "\(notification.topic)",
                "apns.push_type": "\(notification.pushType.rawValue)",
                "apns.priority": "\(notification.priority.rawValue)",
                "apns.id": "\(notification.apnsID)",
                "apns.payload": "\(String(decoding: notification.payload, as: UTF8.self))",
            ]
        )
        return .answered(APNSResponse(status: 200, apnsID: notification.apnsID))
    }
}
