import APNSCore
import BridgeCore
import Foundation
import Testing
import Waiting

/// The one-notification forms written on top of ``NotificationSender/send(contentsOf:)``.
@Suite struct NotificationSenderTests {
    /// Keeps every completion until the test answers.
    final class HeldSender: NotificationSender {
        let held = AsyncCondition<[@Sendable (APNSResult) -> Void]>([])

        func send(contentsOf batch: consuming [SendRequest]) {
            self.held.withLock { $0.append(contentsOf: batch.map(\.completion)) }
        }

        /// Waits until a notification was handed over.
        func waitForHandOver() async {
            _ = await self.held.wait { $0.isEmpty ? nil : () }
        }

        func answerAll(_ result: APNSResult) {
            for completion in self.held.read({ $0 }) { completion(result) }
        }
    }

    static let notification = APNSCore.Notification(
        deviceToken: String(repeating: "ab", count: 32), topic: "com.example", pushType: .alert, id: UUID(),
        payload: Array(#"{"aps":{}}"#.utf8))

    @Test("the async form returns the answer the batch path gave")
    func answered() async {
        let sender = HeldSender()
        async let result = sender.send(Self.notification, app: nil)
        await sender.waitForHandOver()
        sender.answerAll(.answered(APNSResponse(status: 410, reason: .unregistered)))
        let answer = await result
        guard case .answered(let response) = answer else {
            Issue.record("expected an answer")
            return
        }
        #expect(response.status == 410)
    }

    @Test("a task cancelled while it waits gets connection-lost at once; the late answer is dropped")
    func cancelled() async {
        let sender = HeldSender()
        let waiting = Task { await sender.send(Self.notification, app: nil) }
        await sender.waitForHandOver()
        waiting.cancel()
        let result = await waiting.value
        guard case .failed(.connectionLost) = result else {
            Issue.record("expected connection lost")
            return
        }
        sender.answerAll(.answered(APNSResponse(status: 200)))
    }
}
