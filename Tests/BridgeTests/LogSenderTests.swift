import APNSCore
import Bridge
import BridgeCore
import Foundation
import Logging
import Synchronization
import Testing

@Suite("The log sender")
struct LogSenderTests {
    static func notification(_ index: Int) -> APNSCore.Notification {
        APNSCore.Notification(
            deviceToken: String(repeating: "ab", count: 32), topic: "com.example.app", pushType: .alert, id: UUID(),
            payload: Array(#"{"aps":{"alert":"\#(index)"}}"#.utf8))
    }

    @Test("answers every notification of a batch 200 on the caller's thread, without a task per notification")
    func answersAtOnce() {
        let sender = LogSender(logger: Logger(label: "test"))
        let answers = Mutex([String: Int]())
        let batch = (0..<3).map { index in
            let notification = Self.notification(index)
            return SendRequest(notification: notification, app: nil) { result in
                guard case .answered(let response) = result else { return }
                answers.withLock { $0[notification.apnsID] = response.status }
            }
        }
        sender.send(contentsOf: batch)
        // No wait: a task per notification would answer later.
        #expect(
            answers.withLock { $0 } == Dictionary(uniqueKeysWithValues: batch.map { ($0.notification.apnsID, 200) }))
    }
}
