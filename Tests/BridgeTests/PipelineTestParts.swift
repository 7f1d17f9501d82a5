import APNSCore
@testable import Bridge
import Foundation
import Routing
import Testing

// Parts shared by the pipeline tests: a mapper and a scripted sender. The source and sink are either
// in-memory (PipelineTests) or librdkafka's mock cluster (KafkaPipelineTests).

/// Maps `{"tokens": [...]}` to one alert per token; not JSON dead-letters; no `tokens` matches nothing.
struct TokensMapper: EventMapper {
    let expiration: Int64?
    func map(_ event: SourceEvent) -> [RouteMapping] {
        guard let value = event.value,
            let object = try? JSONSerialization.jsonObject(with: Data(value)) as? [String: Any]
        else {
            let reason = DeadLetterReason(code: .notJSON, route: "r", field: nil, message: "the event is not JSON")
            return [RouteMapping(route: "r", app: nil, outcome: .deadLetter(reason))]
        }
        guard let tokens = object["tokens"] as? [String] else { return [] }
        let notifications = tokens.enumerated().map { index, token in
            MappedNotification(tokenIndex: index, notification: APNSCore.Notification(
                deviceToken: token, topic: "com.example", pushType: .alert, expirationEpochSeconds: self.expiration,
                id: UUID(uuidString: String(format: "00000000-0000-0000-%04d-%012d", index, event.source.offset))!,
                payload: Array(#"{"aps":{}}"#.utf8)
            ))
        }
        return [RouteMapping(route: "r", app: nil, outcome: .notifications(notifications))]
    }
}

struct ScriptedSender: NotificationSender {
    let answer: @Sendable (String) async -> APNSResult
    func send(_ notification: APNSCore.Notification, app: String?) async -> APNSResult {
        await self.answer(notification.deviceToken)
    }
}

/// Polls `condition` every few milliseconds for at most `timeout`.
func waitUntil(timeout: Duration = .seconds(60), _ condition: () -> Bool) async throws {
    let deadline = ContinuousClock.now + timeout
    while !condition() {
        guard ContinuousClock.now < deadline else {
            Issue.record("condition not met within \(timeout)")
            throw CancellationError()
        }
        try await Task.sleep(for: .milliseconds(2))
    }
}
