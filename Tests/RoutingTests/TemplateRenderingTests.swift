import APNSCore
import Foundation
import Routing
import Testing

@Suite struct TemplateRenderingTests {
    /// Strings an event could carry to try and break the payload's JSON or the template.
    static let hostileStrings: [(name: String, value: String)] = [
        ("double quote", #"He said "ship it""#),
        ("backslash", #"C:\Users\"x"#),
        ("newline and tab", "line1\nline2\tend\r"),
        ("control characters", "\u{00}\u{01}\u{1F}\u{7F}"),
        ("JSON injection", #"", "aps": {"badge": 99}, "x": ""#),
        ("mustache tag in data", "{{order.id}} {{#x}}y{{/x}} {{{z}}}"),
        ("html specials", "<b>Tom & Jerry's</b> &amp;"),
        ("unicode", "Grüße, 東京, עברית"),
        ("emoji", "📦🚚 👩‍👩‍👧 🇯🇵"),
        ("line separators", "a\u{2028}b\u{2029}c"),
        ("lone backslash at end", "end\\"),
    ]

    @Test(arguments: Self.hostileStrings)
    func hostileTextInATemplatedLeafStaysTheSameString(name: String, value: String) throws {
        let router = try router(payload: ["aps": ["alert": ["title": "Hi {{name}}!", "body": "{{name}}"]]])
        let json = JSONValue.object([("token", "abcd"), ("name", .string(value))]).jsonText
        let payload = try renderedPayload(router, json)
        let alert = (payload["aps"] as? [String: Any])?["alert"] as? [String: Any]
        #expect(alert?["title"] as? String == "Hi \(value)!", "\(name)")
        #expect(alert?["body"] as? String == value, "\(name)")
        #expect(payload.count == 1, "\(name): no member was injected")
    }

    /// Header values may hold visible ASCII and spaces only (0x20-0x7E, no space at either end): anything else
    /// is rejected with Apple's reason for that header, so a control character is never sent.
    static func isHeaderSafe(_ value: String) -> Bool {
        value.utf8.allSatisfy { $0 >= 0x20 && $0 <= 0x7E } && value.first != " " && value.last != " "
    }

    @Test(arguments: Self.hostileStrings)
    func hostileTextInTheCollapseIDIsInsertedVerbatimOnlyWhenItIsVisibleASCII(name: String, value: String) throws {
        let router = try router(payload: ["a": 1], deviceTokens: "{{token}}") { $0.collapseID = "{{cid}}" }
        let json = JSONValue.object([("token", .string(validToken)), ("cid", .string(value))]).jsonText
        let mapped = try #require(try notifications(router, json).first)
        #expect(mapped.notification.collapseID == value, "\(name): the value is kept, to be reported")
        if Self.isHeaderSafe(value) {
            #expect(mapped.localRejection == nil, "\(name)")
        } else {
            #expect(mapped.localRejection == .badCollapseId, "\(name)")
        }
    }

    @Test(arguments: Self.hostileStrings)
    func hostileTextInTheDeviceTokenIsRejectedAsBadDeviceTokenUnlessVisibleASCII(name: String, value: String) throws {
        let router = try router(payload: ["a": 1], deviceTokens: "t-{{token}}")
        let json = JSONValue.object([("token", .string(value))]).jsonText
        let mapped = try #require(try notifications(router, json).first)
        #expect(mapped.notification.deviceToken == "t-\(value)", "\(name)")
        #expect(mapped.localRejection == (Self.isHeaderSafe("t-\(value)") ? nil : .badDeviceToken), "\(name)")
    }

    @Test func aCRLFInjectedThroughAKafkaHeaderIsNeverSent() throws {
        let router = try router(payload: ["a": 1]) { $0.collapseID = "order-{{_headers.order}}" }
        let mapped = try #require(
            try notifications(
                router, #"{"token":"\#(validToken)"}"#, headers: [("order", Array("x\r\napns-priority: 5".utf8))]
            ).first)
        #expect(mapped.localRejection == .badCollapseId)
        #expect(NotificationValidation.validate(mapped.notification) == .badCollapseId)
    }

    @Test func ampersandIsNotHTMLEscapedByAnyTagForm() throws {
        let router = try router(payload: ["a": "{{v}}.", "b": "{{{v}}}.", "c": "{{& v}}."])
        let payload = try renderedPayload(router, #"{"token":"t","v":"Tom & <Jerry>"}"#)
        #expect(payload["a"] as? String == "Tom & <Jerry>.")
        #expect(payload["b"] as? String == "Tom & <Jerry>.")
        #expect(payload["c"] as? String == "Tom & <Jerry>.")
    }

    @Test func literalLeavesWithQuotesAreEscaped() throws {
        let router = try router(payload: ["sound": #"say "hi" \ now"#])
        let payload = try renderedPayload(router, #"{"token":"t"}"#)
        #expect(payload["sound"] as? String == #"say "hi" \ now"#)
    }

    @Test func singleTagLeavesKeepTheValuesJSONType() throws {
        let router = try router(payload: [
            "n": "{{v.n}}", "d": "{{ v.d }}", "b": "{{v.b}}", "s": "{{v.s}}", "a": "{{v.a}}", "o": "{{{v.o}}}",
        ])
        let mapped = try notifications(
            router, #"{"token":"t","v":{"n":3,"d":2.5,"b":false,"s":"x","a":[1,"y"],"o":{"k":null}}}"#)
        #expect(payloadText(mapped[0]) == #"{"n":3,"d":2.5,"b":false,"s":"x","a":[1,"y"],"o":{"k":null}}"#)
    }

    @Test func largeIntegersPassThroughTypedLeavesExactly() throws {
        let router = try router(payload: ["id": "{{id}}"])
        let mapped = try notifications(router, #"{"token":"t","id":9007199254740993}"#)
        #expect(payloadText(mapped[0]) == #"{"id":9007199254740993}"#)
    }

    @Test func nonStringValuesInTextAreWrittenAsJSONText() throws {
        let router = try router(payload: ["t": "{{n}}/{{b}}/{{a}}"])
        let payload = try renderedPayload(router, #"{"token":"t","n":7,"b":true,"a":[1,"x"]}"#)
        #expect(payload["t"] as? String == #"7/true/[1,"x"]"#)
    }

    @Test func missingOrNullLeavesAreLeftOutAndEmptyObjectsStay() throws {
        let router = try router(payload: [
            "aps": ["alert": ["title": "{{title}}", "body": "Hi {{name}}"], "badge": "{{badge}}", "sound": "default"],
            "extra": "{{nothing}}",
        ])
        let mapped = try notifications(router, #"{"token":"t","badge":null}"#)
        #expect(payloadText(mapped[0]) == #"{"aps":{"alert":{},"sound":"default"}}"#)
    }

    @Test func missingArrayElementsAreLeftOutOfTheArray() throws {
        let router = try router(payload: ["list": ["{{a}}", "{{b}}", "fixed", "x{{c}}"]])
        let mapped = try notifications(router, #"{"token":"t","b":2}"#)
        #expect(payloadText(mapped[0]) == #"{"list":[2,"fixed"]}"#)
    }

    @Test func sectionsRenderWhenTruthyAndIterateArrays() throws {
        let router = try router(payload: [
            "gift": "Order{{#gift}} (a gift from {{from}}){{/gift}}",
            "items": "{{#items}}{{name}};{{/items}}",
            "none": "{{^items}}no items{{/items}}",
            "dot": "{{#tags}}[{{.}}]{{/tags}}",
        ])
        let payload = try renderedPayload(
            router, #"{"token":"t","gift":{"from":"Ann"},"items":[{"name":"a"},{"name":"b"}],"tags":["x","y"]}"#)
        #expect(payload["gift"] as? String == "Order (a gift from Ann)")
        #expect(payload["items"] as? String == "a;b;")
        #expect(payload["none"] as? String == "")
        #expect(payload["dot"] as? String == "[x][y]")
    }

    @Test func falsySectionsRenderNothingAndInvertedSectionsRender() throws {
        let router = try router(payload: ["t": "A{{#gift}}gift{{/gift}}{{^gift}}no gift{{/gift}}"])
        for json in [
            #"{"token":"t"}"#, #"{"token":"t","gift":false}"#, #"{"token":"t","gift":[]}"#,
            #"{"token":"t","gift":null}"#,
        ] {
            let payload = try renderedPayload(router, json)
            #expect(payload["t"] as? String == "Ano gift", "\(json)")
        }
    }

    @Test func commentsRenderNothing() throws {
        let router = try router(payload: ["t": "a{{! a note for authors }}b"])
        #expect(try renderedPayload(router, #"{"token":"t"}"#)["t"] as? String == "ab")
    }

    @Test func kafkaCoordinatesAndHeadersAreAvailable() throws {
        let router = try router(payload: [
            "topic": "{{_kafka.topic}}", "partition": "{{_kafka.partition}}", "offset": "{{_kafka.offset}}",
            "key": "{{_kafka.key}}", "ts": "{{_kafka.timestamp}}", "trace": "{{_headers.trace-id}}",
            "dotted": "{{_headers.x.y}}", "absent": "{{_headers.nope}}",
        ])
        let mapped = try notifications(
            router, #"{"token":"t"}"#,
            headers: [("trace-id", Array("first".utf8)), ("trace-id", Array("abc\"1".utf8)), ("x.y", [0x7A])])
        #expect(
            payloadText(mapped[0])
                == #"{"topic":"events","partition":3,"offset":42,"key":"customer-42","ts":1700000000123,"#
                + #""trace":"abc\"1","dotted":"z"}"#
        )
    }

    @Test func payloadFromSendsTheEventsObjectAsItIs() throws {
        let router = try router(payload: nil) { $0.payloadFrom = "notification" }
        let mapped = try notifications(router, #"{"token":"t","notification":{"aps":{"alert":"hi \"you\""},"n":1}}"#)
        #expect(payloadText(mapped[0]) == #"{"aps":{"alert":"hi \"you\""},"n":1}"#)
    }

    @Test func payloadFromMissingOrNotAnObjectDeadLetters() throws {
        let router = try router(payload: nil) { $0.payloadFrom = "notification" }
        let missing = try deadLetter(router, #"{"token":"t"}"#)
        #expect(
            missing?.description == "route test: payload_from: notification is missing; expected the payload object")
        #expect(missing?.code == .missingValue)
        let wrong = try deadLetter(router, #"{"token":"t","notification":"hi"}"#)
        #expect(wrong?.description == "route test: payload_from: notification is a string; expected the payload object")
        #expect(wrong?.code == .invalidValue)
    }

    @Test func constantPayloadIsSentAsWritten() throws {
        let router = try router(payload: ["aps": ["content-available": 1], "list": [1, "two", nil]])
        let mapped = try notifications(router, #"{"token":"t"}"#)
        #expect(payloadText(mapped[0]) == #"{"aps":{"content-available":1},"list":[1,"two",null]}"#)
    }
}
