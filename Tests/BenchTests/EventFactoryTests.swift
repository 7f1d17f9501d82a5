import BenchSupport
import Foundation
import Testing

/// The benchmark's events with `--ordering-keys N`: `activity.id` cycles over N keys, one device token each.
@Suite struct EventFactoryTests {
    func fields(_ value: [UInt8]) throws -> (activity: String?, token: String?) {
        let object = try #require(try JSONSerialization.jsonObject(with: Data(value)) as? [String: Any])
        let activity = (object["activity"] as? [String: Any])?["id"] as? String
        let token = ((object["customer"] as? [String: Any])?["apns_tokens"] as? [String])?.first
        return (activity, token)
    }

    @Test("with activities, each event names its activity and the activity's one device token")
    func activities() throws {
        let factory = EventFactory(activityCount: 10)
        var tokens: [String: String] = [:]
        for index in 0..<50 {
            let (activity, token) = try self.fields(factory.event(index).value)
            #expect(activity == "act-\(index % 10)")
            let known = tokens[activity ?? ""] ?? token
            #expect(token == known, "an activity changed its device token")
            tokens[activity ?? ""] = token
        }
        #expect(Set(tokens.values).count == 10)
        // nghttpd's document root holds the tokens of the first events: the activities' are among them.
        #expect(Set(tokens.values).isSubset(of: EventFactory.deviceTokens(eventCount: 50)))
    }

    @Test("without activities the events are as before: no activity, a token per event")
    func plain() throws {
        let factory = EventFactory()
        let first = try self.fields(factory.event(0).value)
        let second = try self.fields(factory.event(1).value)
        #expect(first.activity == nil)
        #expect(first.token != second.token)
    }
}
