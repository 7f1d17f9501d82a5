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
        #expect(Set(tokens.values).isSubset(of: factory.deviceTokens(eventCount: 50)))
    }

    @Test("the events cycle over the factory's device tokens, which are what nghttpd and h2load are given")
    func tokenCycle() throws {
        let factory = EventFactory(tokenCount: 4)
        let tokens = try (0..<12).map { try self.fields(factory.event($0).value).token ?? "" }
        #expect(Set(tokens).count == 4)
        #expect(tokens[0] == tokens[4] && tokens[1] == tokens[9])
        #expect(Set(tokens) == Set(factory.deviceTokens(eventCount: 1000)))
        #expect(EventFactory(activityCount: 8, tokenCount: 4).tokenCount == 8, "an activity never shares a token")
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
