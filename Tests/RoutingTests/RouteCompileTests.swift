import Routing
import Testing

@Suite struct RouteCompileTests {
    /// A valid route to break one field at a time.
    static func base(_ configure: (inout RouteSpec) -> Void) -> [RouteSpec] {
        var spec = RouteSpec(
            name: "r", inputTopic: "events", deviceTokens: "{{token}}", topic: "com.example.app", payload: ["a": 1])
        configure(&spec)
        return [spec]
    }

    @Test func theSpecExampleRouteCompiles() {
        #expect(compileErrors([orderShippedRoute()]).isEmpty)
    }

    @Test(arguments: [
        ("{{order.id", "line 1, column"),
        ("{{#gift}}open", "never closed"),
        ("{{#a}}x{{/b}}", "closed with another name"),
    ])
    func brokenTemplateSyntaxIsReportedAtItsKeyPath(template: String, fragment: String) {
        let errors = compileErrors(Self.base { $0.payload = ["aps": ["alert": ["title": .string(template)]]] })
        #expect(errors.count == 1)
        #expect(errors.first?.code == .brokenTemplate)
        #expect(errors.first?.keyPath == "payload.aps.alert.title")
        #expect(errors.first?.message.contains(fragment) == true, "\(errors)")
    }

    @Test(arguments: [
        "{{> partial}}", "{{=<% %>=}}", "{{% CONTENT_TYPE: TEXT}}", "{{uppercased(name)}}", "{{$block}}{{/block}}",
    ])
    func unsupportedMustacheFeaturesAreRejected(template: String) {
        let errors = compileErrors(Self.base { $0.payload = ["t": .string(template)] })
        #expect(errors.map(\.code) == [.brokenTemplate], "\(errors)")
        #expect(errors.first?.keyPath == "payload.t")
    }

    @Test func templatesInArraysAreLocatedByIndex() {
        let errors = compileErrors(Self.base { $0.payload = ["list": ["ok", "{{bad"]] })
        #expect(errors.map(\.keyPath) == ["payload.list[1]"])
    }

    @Test func unknownPushTypeSuggestsTheClosestOne() {
        let errors = compileErrors(Self.base { $0.pushType = "backgound" })
        #expect(errors.map(\.code) == [.unknownPushType])
        #expect(errors.first?.keyPath == "push_type")
        #expect(errors.first?.hint == #"did you mean "background"?"#)
    }

    @Test func unknownPushTypeFarFromAnyListsThemAll() {
        let errors = compileErrors(Self.base { $0.pushType = "sms" })
        #expect(errors.first?.hint?.hasPrefix("use one of: alert, background, voip") == true)
    }

    @Test func backgroundWithPriority10IsRejected() {
        let errors = compileErrors(
            Self.base {
                $0.pushType = "background"
                $0.priority = 10
            })
        #expect(errors.map(\.code) == [.priorityNotAllowed])
        #expect(errors.first?.keyPath == "priority")
    }

    @Test(arguments: [0, 3, 11, -1])
    func prioritiesOtherThan10_5_1AreRejected(priority: Int) {
        let errors = compileErrors(Self.base { $0.priority = priority })
        #expect(errors.map(\.code) == [.invalidPriority])
    }

    @Test func payloadAndPayloadFromTogetherConflict() {
        let errors = compileErrors(Self.base { $0.payloadFrom = "notification" })
        #expect(errors.map(\.code) == [.conflictingFields])
        #expect(errors.first?.keyPath == "payload")
    }

    @Test func neitherPayloadNorPayloadFromIsAnError() {
        let errors = compileErrors(Self.base { $0.payload = nil })
        #expect(errors.map(\.code) == [.missingField])
    }

    @Test func aPayloadThatIsNotAnObjectIsRejected() {
        let errors = compileErrors(Self.base { $0.payload = ["a", "b"] })
        #expect(errors.map(\.code) == [.invalidValue])
    }

    @Test func expirationWithTTLConflicts() {
        let errors = compileErrors(
            Self.base {
                $0.expiration = "{{exp}}"
                $0.ttl = .seconds(60)
            })
        #expect(errors.map(\.code) == [.conflictingFields])
        #expect(errors.first?.keyPath == "expiration")
    }

    @Test func aTTLBelowOneSecondIsRejected() {
        #expect(compileErrors(Self.base { $0.ttl = .milliseconds(500) }).map(\.keyPath) == ["ttl"])
    }

    @Test func aLiteralExpirationMustBeEpochSeconds() {
        #expect(compileErrors(Self.base { $0.expiration = "tomorrow" }).map(\.code) == [.invalidValue])
        #expect(compileErrors(Self.base { $0.expiration = "0" }).isEmpty)
    }

    @Test func deviceTokensWithoutATagIsRejected() {
        let errors = compileErrors(Self.base { $0.deviceTokens = "abcdef0123" })
        #expect(errors.map(\.code) == [.deviceTokensNotTemplate])
        #expect(errors.first?.keyPath == "device_tokens")
    }

    @Test func aLiteralCollapseIDLongerThan64BytesIsRejected() {
        let errors = compileErrors(Self.base { $0.collapseID = String(repeating: "c", count: 65) })
        #expect(errors.map(\.keyPath) == ["collapse_id"])
    }

    @Test func emptyRequiredFieldsAreReported() {
        let errors = compileErrors(
            Self.base {
                $0.name = ""
                $0.inputTopic = ""
                $0.topic = ""
                $0.deviceTokens = ""
            })
        #expect(Set(errors.map(\.keyPath)) == ["name", "input_topic", "topic", "device_tokens"])
        #expect(errors.allSatisfy { $0.code == .missingField })
    }

    @Test func malformedMatchPathsAreRejected() {
        let errors = compileErrors(Self.base { $0.match = [("a..b", 1)] })
        #expect(errors.map(\.keyPath) == ["match.a..b"])
    }

    @Test func duplicateRouteNamesAreRejected() {
        let errors = compileErrors(Self.base { _ in } + Self.base { _ in })
        #expect(errors.map(\.code) == [.duplicateRouteName])
        #expect(errors.first?.routeIndex == 1)
    }

    @Test func everyProblemOfEveryRouteIsReportedAtOnce() {
        let first = Self.base {
            $0.pushType = "alrt"
            $0.priority = 7
            $0.payload = ["t": "{{x"]
        }
        var second = Self.base {
            $0.name = "s"
            $0.deviceTokens = "fixed"
        }
        second[0].collapseID = "{{#a}}"
        let errors = compileErrors(first + second)
        #expect(errors.map(\.routeIndex) == [0, 0, 0, 1, 1])
        #expect(errors.map(\.keyPath) == ["push_type", "priority", "payload.t", "device_tokens", "collapse_id"])
    }

    @Test func errorsDescribeRouteKeyPathMessageAndHint() {
        let errors = compileErrors(Self.base { $0.pushType = "backgound" })
        #expect(
            errors.first?.description
                == #"routes[0] (r): push_type: unknown push type "backgound" (hint: did you mean "background"?)"#)
    }

    @Test func sectionsNestedDeeperThan32AreRejectedBeforeParsing() {
        let deep = String(repeating: "{{#a}}", count: 100_000) + String(repeating: "{{/a}}", count: 100_000)
        let errors = compileErrors(Self.base { $0.payload = ["t": .string(deep)] })
        #expect(errors.map(\.keyPath) == ["payload.t"])
        #expect(errors.first?.message.contains("nested deeper than 32") == true)
        let fine = String(repeating: "{{#a}}", count: 32) + String(repeating: "{{/a}}", count: 32)
        #expect(compileErrors(Self.base { $0.payload = ["t": .string(fine)] }).isEmpty)
    }

    @Test func aTTLOverAYearIsRejected() {
        let errors = compileErrors(Self.base { $0.ttl = .seconds(367 * 86_400) })
        #expect(errors.map(\.keyPath) == ["ttl"])
        #expect(compileErrors(Self.base { $0.ttl = .seconds(30 * 86_400) }).isEmpty)
    }

    @Test func aTopicOrLiteralCollapseIDWithAControlCharacterIsRejected() {
        #expect(compileErrors(Self.base { $0.topic = "com.example\r\nx" }).map(\.keyPath) == ["topic"])
        #expect(compileErrors(Self.base { $0.collapseID = "a\tb" }).map(\.keyPath) == ["collapse_id"])
    }
}
