import APNSCore
import APNSSimulator
import Crypto
import Foundation
import Testing

@Suite("Simulator engine")
struct SimulatorEngineTests {
    let key = P256.Signing.PrivateKey()
    let clock = ManualClock()

    func scenario() -> SimulatorScenario {
        var scenario = SimulatorScenario()
        scenario.topics = [Fixtures.topic]
        scenario.jwtKeys = [.init(keyID: Fixtures.keyID, teamID: Fixtures.teamID, publicKey: self.key.publicKey)]
        return scenario
    }

    func token(
        issuedAt: Date? = nil, keyID: String = Fixtures.keyID, team: String = Fixtures.teamID,
        key: P256.Signing.PrivateKey? = nil
    ) -> String {
        let issued = Int64((issuedAt ?? self.clock.now()).timeIntervalSince1970)
        let jwt = try! ProviderTokenJWT.sign(
            keyID: keyID, teamID: team, issuedAtEpochSeconds: issued, privateKey: key ?? self.key
        )
        return "bearer \(jwt.compact)"
    }

    func request(
        _ notification: APNSCore.Notification = Fixtures.notification(),
        authorization: String?,
        connection: Int = 1,
        stream: Int = 1,
        edit: (inout [(name: String, value: String)]) -> Void = { _ in }
    ) -> SimulatorRequest {
        var headers = notification.apnsHeaders
        if let authorization { headers.append((name: "authorization", value: authorization)) }
        edit(&headers)
        return SimulatorRequest(
            method: "POST", path: notification.path, headers: headers, body: notification.payload,
            connectionID: connection, streamNumber: stream
        )
    }

    func answer(_ decision: SimulatorDecision) -> SimulatorAnswer? {
        if case .respond(let answer, _) = decision { return answer }
        return nil
    }

    @Test(
        "a valid request of every push type is answered 200 with apns-id echoed and an apns-unique-id",
        arguments: PushType.allCases)
    func accepted(pushType: PushType) throws {
        let engine = SimulatorEngine(scenario: self.scenario(), clock: self.clock)
        let notification = Fixtures.notification(pushType: pushType)
        let answer = try #require(self.answer(engine.handle(self.request(notification, authorization: self.token()))))
        #expect(answer.status == 200)
        #expect(answer.body.isEmpty)
        #expect(answer.headers.first { $0.name == "apns-id" }?.value == notification.apnsID)
        let unique = try #require(answer.headers.first { $0.name == "apns-unique-id" }?.value)
        #expect(UUID(uuidString: unique) != nil)
    }

    @Test("without apns-id the simulator generates one")
    func generatedID() throws {
        let engine = SimulatorEngine(scenario: self.scenario(), clock: self.clock)
        let request = self.request(authorization: self.token()) { $0.removeAll { $0.name == "apns-id" } }
        let answer = try #require(self.answer(engine.handle(request)))
        let id = try #require(answer.headers.first { $0.name == "apns-id" }?.value)
        #expect(NotificationValidation.validateMessageID(id) == nil)
    }

    @Test("apns-unique-id is a version 4 UUID in lowercase, different in every answer")
    func uniqueIDs() throws {
        let engine = SimulatorEngine(scenario: self.scenario(), clock: self.clock)
        let auth = self.token()
        let ids = try (0..<100).map { _ in
            try #require(
                self.answer(engine.handle(self.request(authorization: auth)))?.headers.first {
                    $0.name == "apns-unique-id"
                }?.value)
        }
        #expect(Set(ids).count == ids.count)
        for id in ids {
            #expect(NotificationValidation.validateMessageID(id) == nil)
            #expect(UUID(uuidString: id)?.uuidString.lowercased() == id)
            #expect(Array(id)[14] == "4")
            #expect("89ab".contains(Array(id)[19]))
        }
    }

    @Test("the date header follows the engine's clock from one second to the next")
    func dateHeader() throws {
        let engine = SimulatorEngine(scenario: self.scenario(), clock: self.clock)
        let auth = self.token()
        func date() -> String? {
            self.answer(engine.handle(self.request(authorization: auth)))?.headers.first { $0.name == "date" }?.value
        }
        #expect(date() == HTTPDate.format(self.clock.now()))
        self.clock.advance(by: .seconds(1))
        #expect(date() == HTTPDate.format(self.clock.now()))
        self.clock.advance(by: .seconds(86_400))
        #expect(date() == HTTPDate.format(self.clock.now()))
    }

    @Test("header and payload faults get Apple's status and reason")
    func headerFaults() throws {
        let engine = SimulatorEngine(scenario: self.scenario(), clock: self.clock)
        let auth = self.token()
        func reason(_ request: SimulatorRequest) -> String {
            let answer = self.answer(engine.handle(request))!
            return "\(answer.status) \(answer.reason?.rawValue ?? "-")"
        }
        func set(_ name: String, _ value: String) -> (inout [(name: String, value: String)]) -> Void {
            { headers in
                headers.removeAll { $0.name == name }
                headers.append((name: name, value: value))
            }
        }
        #expect(reason(self.request(authorization: auth, edit: set("apns-priority", "7"))) == "400 BadPriority")
        #expect(
            reason(self.request(authorization: auth, edit: set("apns-expiration", "soon"))) == "400 BadExpirationDate")
        #expect(reason(self.request(authorization: auth, edit: set("apns-id", "nope"))) == "400 BadMessageId")
        #expect(
            reason(self.request(authorization: auth, edit: set("apns-collapse-id", String(repeating: "x", count: 65))))
                == "400 BadCollapseId")
        #expect(
            reason(self.request(authorization: auth, edit: set("apns-push-type", "banner"))) == "400 InvalidPushType")
        #expect(reason(self.request(authorization: auth, edit: set("apns-push-type", "voip"))) == "400 BadTopic")
        #expect(
            reason(self.request(authorization: auth, edit: set("apns-topic", "com.other.app"))) == "400 TopicDisallowed"
        )
        #expect(
            reason(self.request(authorization: auth) { $0.removeAll { $0.name == "apns-topic" } }) == "400 MissingTopic"
        )
        #expect(
            reason(self.request(authorization: auth) { $0.append((name: "apns-topic", value: Fixtures.topic)) })
                == "400 DuplicateHeaders")
        let background = Fixtures.notification(pushType: .background, priority: .immediate)
        #expect(reason(self.request(background, authorization: auth)) == "400 BadPriority")

        var empty = Fixtures.notification()
        empty.payload = []
        #expect(reason(self.request(empty, authorization: auth)) == "400 PayloadEmpty")
        var large = Fixtures.notification()
        large.payload = Array(#"{"a":""#.utf8) + Array(repeating: 120, count: 4100) + Array(#""}"#.utf8)
        #expect(reason(self.request(large, authorization: auth)) == "413 PayloadTooLarge")
        var voip = Fixtures.notification(pushType: .voip)
        voip.payload = large.payload
        #expect(reason(self.request(voip, authorization: auth)) == "200 -")
    }

    @Test("a repeated authorization or apns-* header is DuplicateHeaders, also one the simulator does not read")
    func duplicateHeaders() {
        let engine = SimulatorEngine(scenario: self.scenario(), clock: self.clock)
        let auth = self.token()
        func status(_ extra: [(name: String, value: String)]) -> String {
            let answer = self.answer(engine.handle(self.request(authorization: auth) { $0 += extra }))
            return "\(answer?.status ?? 0) \(answer?.reason?.rawValue ?? "-")"
        }
        #expect(status([("authorization", auth)]) == "400 DuplicateHeaders")
        #expect(status([("apns-unknown", "1"), ("apns-unknown", "2")]) == "400 DuplicateHeaders")
        #expect(status([("apns-unknown", "1")]) == "200 -")
        #expect(status([("accept", "*/*"), ("accept", "*/*"), ("x-trace", "1"), ("x-trace", "2")]) == "200 -")
    }

    @Test("path and method faults: BadPath, MissingDeviceToken, BadDeviceToken, MethodNotAllowed")
    func pathFaults() throws {
        let engine = SimulatorEngine(scenario: self.scenario(), clock: self.clock)
        let good = self.request(authorization: self.token())
        func answer(method: String = "POST", path: String) -> SimulatorAnswer {
            var request = good
            request.method = method
            request.path = path
            return self.answer(engine.handle(request))!
        }
        #expect(answer(path: "/2/device/abc").reason == .badPath)
        #expect(answer(path: "/2/device/abc").status == 404)
        #expect(answer(path: "/3/device/").reason == .missingDeviceToken)
        #expect(answer(path: "/3/device/xyz").reason == .badDeviceToken)
        #expect(answer(method: "GET", path: good.path).status == 405)
        #expect(answer(method: "GET", path: good.path).reason == .methodNotAllowed)
    }

    @Test("unregistered tokens get 410 with the configured timestamp; bad tokens BadDeviceToken")
    func tokenLists() throws {
        var scenario = self.scenario()
        scenario.unregisteredTokens[Fixtures.deviceToken(1)] = 1_700_000_000_000
        scenario.badTokens = [Fixtures.deviceToken(2)]
        let engine = SimulatorEngine(scenario: scenario, clock: self.clock)
        let auth = self.token()
        let gone = try #require(
            self.answer(
                engine.handle(
                    self.request(
                        Fixtures.notification(token: Fixtures.deviceToken(1)), authorization: auth))))
        #expect(gone.status == 410)
        #expect(
            ErrorBody.parse(gone.body) == ErrorBody(reason: .unregistered, timestampMilliseconds: 1_700_000_000_000))
        let bad = try #require(
            self.answer(
                engine.handle(
                    self.request(
                        Fixtures.notification(token: Fixtures.deviceToken(2)), authorization: auth))))
        #expect(bad.status == 400)
        #expect(bad.reason == .badDeviceToken)
        #expect(engine.statistics.byToken[Fixtures.deviceToken(1)]?.answered == 1)
        #expect(engine.statistics.byReason["Unregistered"] == 1)
    }

    @Test("provider token faults: missing, unknown key, wrong team, bad signature, expired")
    func providerTokenFaults() throws {
        let engine = SimulatorEngine(scenario: self.scenario(), clock: self.clock)
        func reason(_ authorization: String?, connection: Int) -> Reason? {
            self.answer(engine.handle(self.request(authorization: authorization, connection: connection)))?.reason
        }
        #expect(reason(nil, connection: 1) == .missingProviderToken)
        #expect(reason("bearer nonsense", connection: 2) == .invalidProviderToken)
        #expect(reason(self.token(keyID: "OTHERKEY00"), connection: 3) == .invalidProviderToken)
        #expect(reason(self.token(team: "OTHERTEAM0"), connection: 4) == .invalidProviderToken)
        #expect(reason(self.token(key: P256.Signing.PrivateKey()), connection: 5) == .invalidProviderToken)
        let old = self.clock.now().addingTimeInterval(-3601)
        #expect(reason(self.token(issuedAt: old), connection: 6) == .expiredProviderToken)
        #expect(reason(self.token(), connection: 7) == nil)
    }

    @Test("a new token on the same connection within 20 minutes is TooManyProviderTokenUpdates")
    func tooManyTokenUpdates() throws {
        let engine = SimulatorEngine(scenario: self.scenario(), clock: self.clock)
        let first = self.token()
        #expect(self.answer(engine.handle(self.request(authorization: first)))?.status == 200)
        self.clock.advance(by: .seconds(19 * 60))
        let second = self.token()
        let refused = self.answer(engine.handle(self.request(authorization: second)))
        #expect(refused?.status == 429)
        #expect(refused?.reason == .tooManyProviderTokenUpdates)
        #expect(self.answer(engine.handle(self.request(authorization: second, connection: 2)))?.status == 200)
        self.clock.advance(by: .seconds(60))
        #expect(self.answer(engine.handle(self.request(authorization: second)))?.status == 200)
    }

    @Test("an expired token on the connection, then a fresh one, is accepted (the expired one was never adopted)")
    func expiredThenRenewed() throws {
        let engine = SimulatorEngine(scenario: self.scenario(), clock: self.clock)
        let old = self.token(issuedAt: self.clock.now().addingTimeInterval(-4000))
        #expect(self.answer(engine.handle(self.request(authorization: old)))?.reason == .expiredProviderToken)
        #expect(self.answer(engine.handle(self.request(authorization: self.token())))?.status == 200)
    }

    @Test("certificate-authenticated connections need no provider token")
    func certificateAuthenticated() throws {
        let engine = SimulatorEngine(scenario: self.scenario(), clock: self.clock)
        var request = self.request(authorization: nil)
        request.certificateAuthenticated = true
        #expect(self.answer(engine.handle(request))?.status == 200)
    }

    @Test("injected 429/500/503 follow the rates and are the same for the same seed")
    func injectedFaults() throws {
        var scenario = self.scenario()
        scenario.seed = 7
        scenario.tooManyRequestsRate = 0.1
        scenario.internalServerErrorRate = 0.1
        scenario.serviceUnavailableRate = 0.1
        func run() -> [Int] {
            let engine = SimulatorEngine(scenario: scenario, clock: self.clock)
            let auth = self.token()
            return (0..<2000).map { index in
                self.answer(
                    engine.handle(
                        self.request(
                            Fixtures.notification(token: Fixtures.deviceToken(index)), authorization: auth)))!.status
            }
        }
        let first = run()
        #expect(first == run())
        for status in [429, 500, 503] {
            let count = first.filter { $0 == status }.count
            #expect((120...280).contains(count), "status \(status): \(count)")
        }
    }

    @Test("the connection is dropped at the configured stream; later requests on it go unanswered")
    func dropAfterStreams() throws {
        var scenario = self.scenario()
        scenario.dropAfterStreams = 3
        let engine = SimulatorEngine(scenario: scenario, clock: self.clock)
        let auth = self.token()
        #expect(self.answer(engine.handle(self.request(authorization: auth, stream: 1))) != nil)
        #expect(self.answer(engine.handle(self.request(authorization: auth, stream: 2))) != nil)
        #expect(
            engine.handle(self.request(authorization: auth, stream: 3))
                == .dropConnection(delay: SimulatorEngine.dropGracePeriod))
        #expect(engine.handle(self.request(authorization: auth, stream: 4)) == .ignore)
        let statistics = engine.statistics
        #expect(statistics.requestsReceived == 4)
        #expect(statistics.requestsAnswered == 2)
        #expect(statistics.requestsUnanswered == 2)
        #expect(statistics.connectionsDropped == 1)
    }

    @Test("the stream-limit schedule yields each change once, when the stream count passes it")
    func streamLimitSchedule() {
        var scenario = self.scenario()
        scenario.streamLimitSchedule = [
            .init(afterStreams: 10, maxConcurrentStreams: 1), .init(afterStreams: 20, maxConcurrentStreams: 100),
        ]
        let engine = SimulatorEngine(scenario: scenario, clock: self.clock)
        #expect(engine.connectionActions(connectionID: 1, streamCount: 9).isEmpty)
        #expect(engine.connectionActions(connectionID: 1, streamCount: 12) == [.setMaxConcurrentStreams(1)])
        #expect(engine.connectionActions(connectionID: 1, streamCount: 12).isEmpty)
        #expect(engine.connectionActions(connectionID: 1, streamCount: 20) == [.setMaxConcurrentStreams(100)])
        #expect(engine.statistics.streamLimitChanges == 2)
    }
}
