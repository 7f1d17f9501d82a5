import APNSCore
import Foundation
import Routing
import Testing

@Suite struct RouterMappingTests {
    @Test func specExampleRouteMapsAnEventToOneNotificationPerToken() throws {
        let router = try Router(routes: [orderShippedRoute()])
        let mappings = router.map(event: event(orderShippedEvent))
        try #require(mappings.count == 1)
        #expect(mappings[0].route == "order-shipped")
        guard case .notifications(let mapped) = mappings[0].outcome else {
            Issue.record("expected notifications: \(mappings[0].outcome)")
            return
        }
        #expect(mapped.map(\.notification.deviceToken) == ["aaaa1111", "bbbb2222", "cccc3333"])
        #expect(mapped.map(\.tokenIndex) == [0, 1, 2])
        let first = mapped[0].notification
        #expect(first.topic == "com.example.shop")
        #expect(first.pushType == .alert)
        #expect(first.priority == .immediate)
        #expect(first.expirationEpochSeconds == 1_790_000_000)
        #expect(first.collapseID == "order-A-1001")
        #expect(mapped[0].localRejection == nil)
        #expect(
            payloadText(mapped[0])
                == #"{"aps":{"alert":{"title":"Your order A-1001 has shipped","#
                + #""body":"UPS expects to deliver it tomorrow"},"#
                + #""badge":3,"sound":"default"},"order_id":"A-1001"}"#)
        #expect(Set(mapped.map(\.notification.id)).count == 3)
    }

    @Test func singleStringTokenGivesOneNotification() throws {
        let router = try router(payload: ["a": 1])
        let mapped = try notifications(router, #"{"token":"abc"}"#)
        #expect(mapped.map(\.notification.deviceToken) == ["abc"])
    }

    @Test func emptyTokenArrayDeadLettersAsMissing() throws {
        let router = try router(payload: ["a": 1], deviceTokens: "{{tokens}}")
        let reason = try deadLetter(router, #"{"tokens":[]}"#)
        #expect(
            reason?.description
                == "route test: device_tokens: tokens is an empty array, so the device tokens are missing")
        #expect(reason?.code == .missingValue)
        #expect(reason?.field == "device_tokens")
    }

    @Test func absentOrNullTokensDeadLetterAsMissing() throws {
        let router = try router(payload: ["a": 1], deviceTokens: "{{customer.tokens}}")
        #expect(
            try deadLetter(router, #"{"customer":{}}"#)?.description
                == "route test: device_tokens: customer.tokens is missing")
        #expect(
            try deadLetter(router, #"{"customer":{"tokens":null}}"#)?.description
                == "route test: device_tokens: customer.tokens is null, so the device token is missing")
    }

    @Test func nonStringTokenElementDeadLettersNamingIt() throws {
        let router = try router(payload: ["a": 1], deviceTokens: "{{tokens}}")
        let reason = try deadLetter(router, #"{"tokens":["ok",42]}"#)
        #expect(
            reason?.description == "route test: device_tokens: tokens[1] is an integer; every token must be a string")
        #expect(reason?.code == .invalidValue)
    }

    @Test func tokenOfAnotherTypeDeadLetters() throws {
        let router = try router(payload: ["a": 1], deviceTokens: "{{tokens}}")
        let reason = try deadLetter(router, #"{"tokens":{"a":"b"}}"#)
        #expect(
            reason?.description
                == "route test: device_tokens: tokens is an object; expected a string or an array of strings")
    }

    @Test func textTokenTemplateWithAMissingTagDeadLetters() throws {
        let router = try router(payload: ["a": 1], deviceTokens: "{{prefix}}{{token}}")
        let reason = try deadLetter(router, #"{"token":"x"}"#)
        #expect(reason?.description == "route test: device_tokens: prefix is missing, so the device token is missing")
    }

    @Test func matchSelectsOnlyEventsWhoseFieldsAreEqual() throws {
        let router = try Router(routes: [orderShippedRoute(match: [("type", "shipped"), ("order.priority", 1)])])
        let matching = #"{"type":"shipped","order":{"priority":1},"customer":{"apns_tokens":"t"}}"#
        let otherType = #"{"type":"cancelled","order":{"priority":1},"customer":{"apns_tokens":"t"}}"#
        let doubleNotInteger = #"{"type":"shipped","order":{"priority":1.0},"customer":{"apns_tokens":"t"}}"#
        let absent = #"{"customer":{"apns_tokens":"t"}}"#
        #expect(router.map(event: event(matching)).count == 1)
        #expect(router.map(event: event(otherType)).isEmpty)
        #expect(router.map(event: event(doubleNotInteger)).isEmpty)
        #expect(router.map(event: event(absent)).isEmpty)
    }

    @Test func everyMatchingRouteFiresInConfigurationOrder() throws {
        var second = orderShippedRoute(match: [])
        second.name = "audit"
        let router = try Router(routes: [orderShippedRoute(), second])
        #expect(router.map(event: event(orderShippedEvent)).map(\.route) == ["order-shipped", "audit"])
        #expect(router.map(event: event(#"{"type":"x","customer":{"apns_tokens":"t"}}"#)).map(\.route) == ["audit"])
    }

    @Test func eventsOfOtherTopicsMatchNoRoute() throws {
        let router = try Router(routes: [orderShippedRoute()])
        #expect(router.map(event: event(orderShippedEvent, topic: "other")).isEmpty)
        #expect(router.inputTopics == ["orders.shipped"])
        #expect(router.routes(forTopic: "orders.shipped") == ["order-shipped"])
        #expect(router.routes(forTopic: "other").isEmpty)
    }

    @Test(arguments: ["not json", "{\"a\":", "", "\u{FEFF}{}"])
    func anEventThatIsNotJSONIsOneDeadLetterWithNoRouteHoweverManyRoutesItsTopicHas(text: String) throws {
        var second = orderShippedRoute(match: [])
        second.name = "audit"
        let router = try Router(routes: [orderShippedRoute(), second])
        let mappings = router.map(event: event(text))
        #expect(mappings.map(\.route) == [""])
        for mapping in mappings {
            guard case .deadLetter(let reason) = mapping.outcome else {
                Issue.record("expected a dead letter: \(mapping.outcome)")
                continue
            }
            #expect(reason.code == .notJSON)
            #expect(reason.description.hasPrefix("the event value is not JSON: "))
        }
    }

    @Test func aMalformedFieldNoRouteReadsStillMakesTheEventNotJSON() throws {
        let router = try router(payload: ["a": "{{token}}"])
        let reason = try deadLetter(router, #"{"token":"t","unused":{"deep":["\x"]}}"#)
        #expect(reason?.code == .notJSON)
        #expect(
            reason?.description
                == "the event value is not JSON: "
                + "invalid string (bad escape or raw control character) at byte 33"
        )
    }

    @Test func fieldsReadOnlyInsideSectionsAndTypedLeavesAreAvailable() throws {
        let router = try router(payload: ["all": "{{order}}", "each": "{{#items}}{{sku}}{{token}},{{/items}}"])
        let mapped = try notifications(
            router, #"{"token":"t","order":{"id":1,"x":[true]},"items":[{"sku":"a"},{"sku":"b"}],"other":1}"#)
        #expect(payloadText(mapped[0]) == #"{"all":{"id":1,"x":[true]},"each":"at,bt,"}"#)
    }

    /// Member names are matched against the fields routes read by their bytes; a name written with escapes
    /// is the same name once decoded, so it is found too (and the last duplicate wins, as for any lookup).
    @Test func memberNamesWrittenWithEscapesAreTheFieldsRoutesRead() throws {
        let router = try router(payload: ["a": "{{order.id}}", "b": "{{name}}"])
        let mapped = try notifications(
            router, #"{"tok\u0065n":"t","\u006frder":{"i\u0064":7,"id":8},"name":"y","n\u0061me":"z"}"#)
        #expect(payloadText(mapped[0]) == #"{"a":8,"b":"z"}"#)
        #expect(mapped[0].notification.deviceToken == "t")
    }

    @Test func aTombstoneDeadLetters() throws {
        let router = try Router(routes: [orderShippedRoute()])
        let mappings = router.map(event: SourceEvent(topic: "orders.shipped", partition: 0, offset: 1, value: nil))
        guard case .deadLetter(let reason)? = mappings.first?.outcome else {
            Issue.record("expected a dead letter: \(mappings)")
            return
        }
        #expect(
            reason.description == "the event has no value (tombstone); expected a JSON document")
        #expect(mappings.map(\.route) == [""])
    }

    @Test func matchCanUseKafkaHeaders() throws {
        let router = try router(payload: ["a": 1]) { $0.match = [("_headers.kind", "promo")] }
        let matching = router.map(
            event: event(#"{"token":"t"}"#, topic: "events", headers: [("kind", Array("promo".utf8))]))
        #expect(matching.count == 1)
        #expect(router.map(event: event(#"{"token":"t"}"#, topic: "events")).isEmpty)
    }

    @Test func expirationAcceptsIntegersAndDigitStrings() throws {
        let router = try router(payload: ["a": 1]) { $0.expiration = "{{exp}}" }
        #expect(
            try notifications(router, #"{"token":"t","exp":1790000000}"#).first?.notification.expirationEpochSeconds
                == 1_790_000_000)
        #expect(try notifications(router, #"{"token":"t","exp":"0"}"#).first?.notification.expirationEpochSeconds == 0)
        #expect(try notifications(router, #"{"token":"t"}"#).first?.notification.expirationEpochSeconds == nil)
    }

    @Test(arguments: [#""tomorrow""#, "1.5", "true", "[1]", #""-""#, #""+5""#, #"" 5""#, #""""#])
    func expirationThatIsNotEpochSecondsDeadLettersNamingTheField(value: String) throws {
        let router = try router(payload: ["a": 1]) { $0.expiration = "{{exp}}" }
        let reason = try deadLetter(router, #"{"token":"t","exp":\#(value)}"#)
        #expect(reason?.field == "expiration")
        #expect(reason?.code == .invalidValue)
        #expect(reason?.description.contains("expected integer epoch seconds") == true, "\(String(describing: reason))")
    }

    @Test func ttlCountsFromTheInjectedClock() throws {
        let router = try router(payload: ["a": 1]) { $0.ttl = .seconds(3600) }
        #expect(
            try notifications(router, #"{"token":"t"}"#).first?.notification.expirationEpochSeconds == 1_800_003_600)
    }

    @Test func collapseIDIsLeftOutWhenItsValueIsMissing() throws {
        let router = try router(payload: ["a": 1]) { $0.collapseID = "order-{{id}}" }
        #expect(try notifications(router, #"{"token":"t"}"#).first?.notification.collapseID == nil)
        #expect(try notifications(router, #"{"token":"t","id":7}"#).first?.notification.collapseID == "order-7")
    }

    @Test func oversizedPayloadsAreMarkedPayloadTooLargeForEachToken() throws {
        let router = try router(payload: ["aps": ["alert": "{{text}}"]], deviceTokens: "{{tokens}}")
        let big = String(repeating: "x", count: 4100)
        let mapped = try notifications(router, #"{"tokens":["a","b"],"text":"\#(big)"}"#)
        #expect(mapped.map(\.localRejection) == [.payloadTooLarge, .payloadTooLarge])
        let fits = try notifications(router, #"{"tokens":["a"],"text":"\#(String(repeating: "x", count: 4000))"}"#)
        #expect(fits.first?.localRejection == nil)
    }

    @Test func voipPayloadsMayBeLargerThanAlertPayloads() throws {
        let router = try router(payload: ["d": "{{text}}"]) { $0.pushType = "voip" }
        let mapped = try notifications(router, #"{"token":"t","text":"\#(String(repeating: "x", count: 5000))"}"#)
        #expect(mapped.first?.localRejection == nil)
    }

    @Test(arguments: PushType.allCases)
    func everyPushTypeGetsItsTopicSuffixAndDefaultPriority(pushType: PushType) throws {
        let router = try router(payload: ["a": 1]) { $0.pushType = pushType.rawValue }
        let notification = try #require(try notifications(router, #"{"token":"t"}"#).first?.notification)
        #expect(notification.pushType == pushType)
        #expect(notification.topic == "com.example.app" + pushType.topicSuffix)
        #expect(notification.priority == (pushType == .background ? .powerConsiderate : .immediate))
    }

    @Test func aTopicThatAlreadyHasTheSuffixKeepsIt() throws {
        let router = try router(payload: ["a": 1]) {
            $0.pushType = "voip"
            $0.topic = "com.example.app.voip"
        }
        #expect(try notifications(router, #"{"token":"t"}"#).first?.notification.topic == "com.example.app.voip")
    }

    @Test func explicitPriorityIsUsed() throws {
        let router = try router(payload: ["a": 1]) { $0.priority = 1 }
        #expect(try notifications(router, #"{"token":"t"}"#).first?.notification.priority == .powerSaving)
    }

    @Test func notificationIDsAreDeterministicPerCoordinatesRouteAndToken() throws {
        let router = try Router(routes: [orderShippedRoute()])
        func ids(offset: Int64) -> [UUID] {
            router.map(event: event(orderShippedEvent, offset: offset)).flatMap { mapping -> [UUID] in
                guard case .notifications(let mapped) = mapping.outcome else { return [] }
                return mapped.map(\.notification.id)
            }
        }
        #expect(ids(offset: 7) == ids(offset: 7))
        #expect(ids(offset: 7) != ids(offset: 8))
        #expect(
            ids(offset: 7).first
                == NotificationID.make(
                    topic: "orders.shipped", partition: 3, offset: 7, route: "order-shipped", tokenIndex: 0))
    }

    @Test func trialExplainsWhyARouteDoesNotMatch() throws {
        let router = try Router(routes: [orderShippedRoute()])
        guard case .notMatched(let why)? = router.trial(of: event(#"{"type":1}"#), route: "order-shipped") else {
            Issue.record("expected notMatched")
            return
        }
        #expect(why == #"match.type: wants "shipped" (string), the event has 1 (integer)"#)
        #expect(router.trial(of: event(orderShippedEvent), route: "nope") == nil)
        guard
            case .mapped(let mapping)? = router.trial(of: event(orderShippedEvent, topic: "x"), route: "order-shipped"),
            case .notifications(let mapped) = mapping.outcome
        else {
            Issue.record("expected a mapping")
            return
        }
        #expect(mapped.count == 3)
    }
}
