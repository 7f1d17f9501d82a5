import APNSCore
import Foundation
import Routing
import Testing

/// Events built to make mapping slow, large, or wrong: each must end as a notification rejected locally with
/// Apple's reason, or as a dead letter, within the render budget (docs/operations.md "Hostile input", docs/templates.md).
@Suite struct HostileEventTests {
    /// `{"token": <valid>, "items": [0, 0, ...] (count), "big": "xxx..." (bigBytes)}`.
    static func itemsAndBig(count: Int, bigBytes: Int) -> String {
        let items = Array(repeating: "0", count: count).joined(separator: ",")
        return #"{"token":"\#(validToken)","items":[\#(items)],"big":"\#(String(repeating: "x", count: bigBytes))"}"#
    }

    // MARK: Render budget

    @Test func aSectionRepeatingABigValueStopsOneByteOverTheLimit() throws {
        let router = try router(payload: ["t": "{{#items}}{{big}}{{/items}}"])
        let mapped = try #require(try notifications(router, Self.itemsAndBig(count: 1000, bigBytes: 204_000)).first)
        #expect(mapped.localRejection == .payloadTooLarge)
        #expect(mapped.notification.payload.count == PushType.alert.maxPayloadBytes + 1)
    }

    @Test func theLimitIsThePushTypesOwn() throws {
        let router = try router(payload: ["t": "{{#items}}{{big}}{{/items}}"]) { $0.pushType = "voip" }
        let mapped = try #require(try notifications(router, Self.itemsAndBig(count: 10, bigBytes: 3000)).first)
        #expect(mapped.localRejection == .payloadTooLarge)
        #expect(mapped.notification.payload.count == 5121)
    }

    @Test func nestedSectionsThatWriteNothingRunOutOfStepsAndArePayloadTooLarge() throws {
        let router = try router(payload: ["t": "{{#a}}{{#b}}{{^c}}{{/c}}{{/b}}{{/a}}"])
        let items = Array(repeating: "0", count: 20_000).joined(separator: ",")
        let mapped = try #require(
            try notifications(router, #"{"token":"\#(validToken)","a":[\#(items)],"b":[\#(items)]}"#).first)
        #expect(mapped.localRejection == .payloadTooLarge)
    }

    @Test func aSectionOverAThousandItemsReadingTheirFieldsIsWellWithinTheBudget() throws {
        let router = try router(payload: ["t": "{{#items}}{{#featured}}{{sku}}{{/featured}}{{/items}}"])
        let items = (0..<1000).map { index in
            #"{"sku":"S\#(index)","featured":\#(index % 100 == 0),"a":1,"b":2,"c":3,"d":4,"e":5,"f":6,"g":7}"#
        }
        let mapped = try #require(
            try notifications(router, #"{"token":"\#(validToken)","items":[\#(items.joined(separator: ","))]}"#).first)
        #expect(mapped.localRejection == nil)
        #expect(payloadText(mapped) == #"{"t":"S0S100S200S300S400S500S600S700S800S900"}"#)
    }

    @Test func aTypedLeafOfAHugeValueIsPayloadTooLargeAndCut() throws {
        let router = try router(payload: ["everything": "{{.}}"])
        let mapped = try #require(try notifications(router, Self.itemsAndBig(count: 100_000, bigBytes: 100)).first)
        #expect(mapped.localRejection == .payloadTooLarge)
        #expect(mapped.notification.payload.count == 4097)
    }

    @Test func payloadFromAHugeObjectIsPayloadTooLargeAndCut() throws {
        let router = try router(payload: nil) { $0.payloadFrom = "n" }
        let mapped = try #require(
            try notifications(
                router, #"{"token":"\#(validToken)","n":{"x":"\#(String(repeating: "y", count: 9000))"}}"#
            )
            .first)
        #expect(mapped.localRejection == .payloadTooLarge)
        #expect(mapped.notification.payload.count == 4097)
    }

    @Test func aCollapseIDTemplateStopsAtTheHeaderLimitAndIsBadCollapseId() throws {
        let router = try router(payload: ["a": 1]) { $0.collapseID = "{{#items}}{{big}}{{/items}}" }
        let mapped = try #require(try notifications(router, Self.itemsAndBig(count: 1000, bigBytes: 204_000)).first)
        #expect(mapped.localRejection == .badCollapseId)
        #expect(mapped.notification.collapseID?.utf8.count == 256)
    }

    @Test func aCollapseIDTemplateThatRunsOutOfStepsIsBadCollapseIdEvenWhenShort() throws {
        let router = try router(payload: ["a": 1]) { $0.collapseID = "c{{#a}}{{#b}}{{/b}}{{/a}}" }
        let items = Array(repeating: "0", count: 1000).joined(separator: ",")
        let mapped = try #require(
            try notifications(router, #"{"token":"\#(validToken)","a":[\#(items)],"b":[\#(items)]}"#).first)
        #expect(mapped.localRejection == .badCollapseId)
    }

    @Test func aDeviceTokenTemplateStopsAtTheHeaderLimitAndIsBadDeviceToken() throws {
        let router = try router(payload: ["a": 1], deviceTokens: "{{#items}}{{big}}{{/items}}")
        let mapped = try #require(try notifications(router, Self.itemsAndBig(count: 1000, bigBytes: 204_000)).first)
        #expect(mapped.localRejection == .badDeviceToken)
        #expect(mapped.notification.deviceToken.utf8.count == 256)
    }

    @Test func aDeviceTokenTemplateThatRunsOutOfStepsIsRejectedEvenWhenItsTextLooksValid() throws {
        // The rendered text so far is a well-formed token, but it is not the whole token the template names.
        let router = try router(payload: ["a": 1], deviceTokens: "{{token}}{{#a}}{{#b}}{{/b}}{{/a}}")
        let items = Array(repeating: "0", count: 1000).joined(separator: ",")
        let mapped = try #require(
            try notifications(router, #"{"token":"\#(validToken)","a":[\#(items)],"b":[\#(items)]}"#).first)
        #expect(mapped.notification.deviceToken == validToken)
        #expect(mapped.localRejection == .badDeviceToken)
    }

    @Test func aHugeDeviceTokenFromTheEventIsCutAndBadDeviceToken() throws {
        let router = try router(payload: ["a": 1], deviceTokens: "{{tokens}}")
        let huge = String(repeating: "ab", count: 500_000)
        let mapped = try notifications(router, #"{"tokens":["\#(validToken)","\#(huge)"]}"#)
        #expect(mapped.map(\.localRejection) == [nil, .badDeviceToken])
        #expect(mapped[1].notification.deviceToken.utf8.count == 256)
    }

    @Test func anExpirationTemplatePastTheHeaderLimitIsADeadLetterWithAShortReason() throws {
        let router = try router(payload: ["a": 1]) { $0.expiration = "{{#items}}{{big}}{{/items}}" }
        let reason = try #require(try deadLetter(router, Self.itemsAndBig(count: 1000, bigBytes: 204_000)))
        #expect(reason.field == "expiration")
        #expect(reason.code == .invalidValue)
        #expect(reason.description.utf8.count < 300)
    }

    @Test func deadLetterReasonsQuoteAtMostAShortExcerptOfTheEvent() throws {
        let router = try router(payload: ["a": 1]) { $0.expiration = "{{exp}}" }
        let big = String(repeating: "z", count: 100_000)
        for value in [#""\#(big)""#, #"["\#(big)"]"#, #"{"k":"\#(big)"}"#] {
            let reason = try #require(try deadLetter(router, #"{"token":"t","exp":\#(value)}"#))
            #expect(reason.description.utf8.count < 200, "\(reason.description.prefix(100))")
        }
    }

    // MARK: Numbers out of range

    static let outOfRangeNumbers = [
        "1e999999", "-1e999999", "1e309", "-1.8e308", "1.7976931348623159e308", String(repeating: "9", count: 400),
        "-" + String(repeating: "1", count: 310), "0.00001e999999", "123456789e301",
    ]

    @Test(arguments: Self.outOfRangeNumbers)
    func aNumberBeyondTheDoubleRangeInATypedLeafDeadLettersNamingItsPath(number: String) throws {
        let router = try router(payload: ["badge": "{{order.total}}"])
        let reason = try #require(try deadLetter(router, #"{"token":"t","order":{"id":1,"total":\#(number)}}"#))
        #expect(reason.code == .numberOutOfRange)
        #expect(reason.field == nil)
        #expect(reason.message.hasPrefix("number out of range at order.total (byte "), "\(reason.message)")
    }

    @Test(arguments: Self.outOfRangeNumbers)
    func aNumberBeyondTheDoubleRangeInAFieldNoRouteReadsDeadLettersAlikeInRunAndRender(number: String) throws {
        let router = try router(payload: ["a": "{{token}}"])
        let json = #"{"token":"t","unread":{"list":[1,2,{"deep":\#(number)}]}}"#
        let reason = try #require(try deadLetter(router, json))
        #expect(reason.message.hasPrefix("number out of range at unread.list.2.deep "), "\(reason.message)")
        guard case .mapped(let mapping)? = router.trial(of: event(json, topic: "events"), route: "test"),
            case .deadLetter(let rendered) = mapping.outcome
        else {
            Issue.record("render did not dead-letter the event")
            return
        }
        #expect(rendered == reason)
    }

    @Test(arguments: [
        ("1e-999999", "0.0"), ("-0", "0"), ("-0.0", "-0.0"), ("1.7976931348623157e308", "1.7976931348623157e+308"),
        ("0e999999", "0.0"), ("0.000e999999999999999999999", "0.0"), ("18446744073709551616", "1.8446744073709552e+19"),
        ("-9223372036854775809", "-9.223372036854776e+18"), ("9223372036854775807", "9223372036854775807"),
    ])
    func numbersWithinRangeRenderAsNumbersNeverNull(number: String, rendered: String) throws {
        let router = try router(payload: ["n": "{{n}}", "t": "n={{n}}"])
        let mapped = try #require(try notifications(router, #"{"token":"t","n":\#(number)}"#).first)
        #expect(payloadText(mapped) == #"{"n":\#(rendered),"t":"n=\#(rendered)"}"#)
    }

    @Test func theReasonsPathIsBoundedWhateverTheKeys() throws {
        let router = try router(payload: ["a": "{{token}}"])
        let hugeKey = String(repeating: "k", count: 1_000_000)
        let nested = String(repeating: #"{"\#(hugeKey.prefix(1000))":"#, count: 200)
        let json = #"{"token":"t","\#(hugeKey)":1,"x":\#(nested)1e999\#(String(repeating: "}", count: 200))}"#
        let reason = try #require(try deadLetter(router, json))
        #expect(reason.code == .numberOutOfRange)
        #expect(reason.description.utf8.count < 400, "\(reason.description.utf8.count) bytes")
    }

    // MARK: Expiration

    @Test(arguments: ["-5", #""-5""#, "-5.0", "-9223372036854775808"])
    func aNegativeExpirationIsRejectedLocallyAsBadExpirationDate(value: String) throws {
        let router = try router(payload: ["a": 1]) { $0.expiration = "{{exp}}" }
        let mapped = try #require(try notifications(router, #"{"token":"\#(validToken)","exp":\#(value)}"#).first)
        #expect(mapped.localRejection == .badExpirationDate)
        #expect((mapped.notification.expirationEpochSeconds ?? 0) < 0)
    }

    @Test(arguments: [
        "1e19", "-1e19", "9.3e18", "18446744073709551615", #""99999999999999999999""#, #""-99999999999999999999""#,
    ])
    func anExpirationBeyond64BitsDeadLettersAsNumberOutOfRange(value: String) throws {
        let router = try router(payload: ["a": 1]) { $0.expiration = "{{exp}}" }
        let reason = try #require(try deadLetter(router, #"{"token":"t","exp":\#(value)}"#))
        #expect(reason.field == "expiration")
        #expect(reason.code == .numberOutOfRange)
        #expect(reason.message.hasPrefix("number out of range"), "\(reason.message)")
    }

    @Test(arguments: [("1.79e9", 1_790_000_000), ("9223372036854775807", Int64.max), (#""0""#, 0), ("0.0", 0)])
    func integralExpirationsUpTo64BitsAreTakenExactly(value: String, seconds: Int64) throws {
        let router = try router(payload: ["a": 1]) { $0.expiration = "{{exp}}" }
        let mapped = try #require(try notifications(router, #"{"token":"\#(validToken)","exp":\#(value)}"#).first)
        #expect(mapped.notification.expirationEpochSeconds == seconds)
        #expect(mapped.localRejection == nil)
    }

    @Test func aTTLNearTheEndOfTimeSaturatesInsteadOfTrapping() throws {
        var spec = RouteSpec(
            name: "test", inputTopic: "events", deviceTokens: "{{token}}", topic: "com.example.app", payload: ["a": 1])
        spec.ttl = .seconds(3600)
        let router = try Router(routes: [spec], epochSeconds: { .max - 10 })
        let mapped = try #require(try notifications(router, #"{"token":"t"}"#).first)
        #expect(mapped.notification.expirationEpochSeconds == .max)
    }
}
