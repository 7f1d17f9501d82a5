import APNSCore
import BridgeCore
import Foundation
import Routing
import Testing

// Parts shared by the pipeline tests, in a module that links no C library so that the core's tests
// (BridgeCoreTests) stay free of them: a mapper and a scripted sender (the waits are in TestWaiting). The source and sink are either
// in-memory (PipelineTests) or librdkafka's mock cluster (KafkaPipelineTests, in BridgeTests).

/// Maps `{"tokens": [...]}` to one alert per token; not JSON dead-letters; no `tokens` matches nothing.
package struct TokensMapper: EventMapper {
    package let expiration: Int64?

    package init(expiration: Int64?) {
        self.expiration = expiration
    }

    package func map(_ event: SourceEvent) -> [RouteMapping] {
        guard let value = event.value,
            let object = try? JSONSerialization.jsonObject(with: Data(value)) as? [String: Any]
        else {
            let reason = DeadLetterReason(code: .notJSON, route: "r", field: nil, message: "the event is not JSON")
            return [RouteMapping(route: "r", app: nil, outcome: .deadLetter(reason))]
        }
        guard let tokens = object["tokens"] as? [String] else { return [] }
        let notifications = tokens.enumerated().map { index, token in
            MappedNotification(
                tokenIndex: index,
                notification: APNSCore.Notification(
                    deviceToken: token, topic: "com.example", pushType: .alert, expirationEpochSeconds: self.expiration,
                    id: UUID(uuidString: String(format: "00000000-0000-0000-%04d-%012d", index, event.source.offset))!,
                    payload: Array(#"{"aps":{}}"#.utf8)
                ))
        }
        return [RouteMapping(route: "r", app: nil, outcome: .notifications(notifications))]
    }
}

/// A test's stand-in for APNs whose answers take time: each notification handed over is answered from a task of its
/// own, as a network answers on another thread. The pipeline drives it through ``NotificationSender/send(contentsOf:)``,
/// the path production takes.
package protocol SimulatedAPNs: NotificationSender {
    /// The answer to `notification`, after as long as the test wants.
    func answer(_ notification: APNSCore.Notification, app: String?) async -> APNSResult
    /// Called on the caller's thread as `notification` is handed over, before its answer's task starts.
    func handedOver(_ notification: APNSCore.Notification)
}

extension SimulatedAPNs {
    package func handedOver(_ notification: APNSCore.Notification) {}

    package func send(contentsOf batch: consuming [SendRequest]) {
        for request in batch {
            self.handedOver(request.notification)
            Task { request.completion(await self.answer(request.notification, app: request.app)) }
        }
    }
}

/// Answers each notification with what `answer` says for its device token.
package struct ScriptedSender: SimulatedAPNs {
    package let answer: @Sendable (String) async -> APNSResult

    package init(answer: @escaping @Sendable (String) async -> APNSResult) {
        self.answer = answer
    }

    package func answer(_ notification: APNSCore.Notification, app: String?) async -> APNSResult {
        await self.answer(notification.deviceToken)
    }
}
