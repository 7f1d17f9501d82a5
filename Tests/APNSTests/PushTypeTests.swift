import APNSCore
import Testing

@Suite("Push types")
struct PushTypeTests {
    @Test("the topic suffix is added only when missing", arguments: PushType.allCases)
    func topicSuffixAddedOnce(pushType: PushType) {
        let once = pushType.topic(for: "com.example.app")
        #expect(once == "com.example.app" + pushType.topicSuffix)
        #expect(pushType.topic(for: once) == once)
    }

    @Test("background pushes default to priority 5 and refuse 10")
    func backgroundPriority() {
        #expect(PushType.background.defaultPriority == .powerConsiderate)
        #expect(!PushType.background.allows(.immediate))
        #expect(PushType.alert.defaultPriority == .immediate)
    }

    @Test("voip payloads may be 5120 bytes, everything else 4096")
    func payloadLimits() {
        for pushType in PushType.allCases {
            #expect(pushType.maxPayloadBytes == (pushType == .voip ? 5120 : 4096))
        }
    }
}

@Suite("Reasons")
struct ReasonTests {
    @Test("every documented reason round-trips through its string", arguments: Reason.documented)
    func roundTrip(reason: Reason) {
        #expect(Reason(rawValue: reason.rawValue) == reason)
        #expect(reason.status != nil)
    }

    @Test("an unknown reason keeps its string")
    func unknownRoundTrip() {
        let reason = Reason(rawValue: "SomethingNew")
        #expect(reason == .unknown("SomethingNew"))
        #expect(reason.rawValue == "SomethingNew")
        #expect(reason.disposition(status: 503) == .retryable)
        #expect(reason.disposition(status: 400) == .rejected)
        #expect(reason.disposition(status: 403) == .systemic)
    }

    @Test("the systemic reasons of docs/operations.md halt the line")
    func systemic() {
        let systemic: [Reason] = [
            .invalidProviderToken, .missingProviderToken, .badCertificate, .badCertificateEnvironment, .forbidden,
            .unrelatedKeyIdInToken, .badEnvironmentKeyIdInToken, .badEnvironmentKeyInToken, .topicDisallowed,
            .badTopic, .missingTopic,
        ]
        for reason in systemic {
            #expect(reason.disposition(status: reason.status!) == .systemic, "\(reason)")
        }
    }

    @Test("dead tokens are flagged for the invalid-token topic")
    func invalidTokens() {
        let flagged = Reason.documented.filter(\.invalidatesToken)
        #expect(Set(flagged) == [.unregistered, .expiredToken, .badDeviceToken, .deviceTokenNotForTopic])
    }
}
