import APNSCore
import Testing

@testable import BridgeCore

@Suite("Delivery state machine")
struct DeliveryStateMachineTests {
    let now: Int64 = 1_800_000_000_000
    let backoff = Backoff(initial: .milliseconds(10), maximum: .milliseconds(80))

    func machine(expiration: Int64? = nil, fault: Reason? = nil, maxAttempts: Int = 3) -> DeliveryStateMachine {
        DeliveryStateMachine(
            expirationEpochSeconds: expiration, localFault: fault, maxAttempts: maxAttempts, backoff: self.backoff
        )
    }

    func answer(_ status: Int, _ reason: Reason? = nil, since: Int64? = nil) -> APNSResult {
        .answered(APNSResponse(status: status, reason: reason, invalidSinceEpochMilliseconds: since))
    }

    @Test("200 is delivered after one attempt")
    func delivered() {
        var machine = self.machine()
        #expect(machine.start(nowEpochMilliseconds: self.now) == .send)
        machine.sending(nowEpochMilliseconds: self.now)
        guard case .finish(let outcome) = machine.received(self.answer(200), nowEpochMilliseconds: self.now + 5) else {
            Issue.record("not finished")
            return
        }
        #expect(outcome.status == .delivered)
        #expect(outcome.httpStatus == 200)
        #expect(outcome.attempts == 1)
        #expect(outcome.firstSentAtEpochMilliseconds == self.now)
        #expect(outcome.invalidTokenReason == nil)
    }

    @Test("a local fault is rejected without sending, with Apple's reason and no HTTP status")
    func localFault() {
        var machine = self.machine(fault: .badDeviceToken)
        guard case .finish(let outcome) = machine.start(nowEpochMilliseconds: self.now) else {
            Issue.record("not finished")
            return
        }
        #expect(outcome.status == .rejected)
        #expect(outcome.httpStatus == nil)
        #expect(outcome.reason == "BadDeviceToken")
        #expect(outcome.attempts == 0)
        #expect(outcome.invalidTokenReason == "BadDeviceToken")
    }

    @Test("a notification that waited in its line is sent when its turn comes, unless it expired meanwhile")
    func turnCame() {
        var fresh = self.machine(expiration: self.now / 1000 + 60)
        #expect(fresh.start(nowEpochMilliseconds: self.now) == .send)
        #expect(fresh.turnCame(nowEpochMilliseconds: self.now + 1_000) == .send)
        var stale = self.machine(expiration: self.now / 1000 + 1)
        #expect(stale.start(nowEpochMilliseconds: self.now) == .send)
        guard case .finish(let outcome) = stale.turnCame(nowEpochMilliseconds: self.now + 5_000) else {
            Issue.record("an expired notification was sent in its turn")
            return
        }
        #expect(outcome.status == .expired)
        #expect(outcome.attempts == 0)
    }

    @Test("a superseded notification names its replacement, was never sent, and has no status or reason")
    func superseded() {
        var machine = self.machine()
        #expect(machine.start(nowEpochMilliseconds: self.now) == .send)
        let outcome = machine.superseded(by: "0b4c2a1e-1111-8222-9333-444455556666", nowEpochMilliseconds: self.now + 7)
        #expect(outcome.status == .superseded)
        #expect(outcome.supersededBy == "0b4c2a1e-1111-8222-9333-444455556666")
        #expect(outcome.attempts == 0)
        #expect(outcome.httpStatus == nil)
        #expect(outcome.reason == nil)
        #expect(outcome.firstSentAtEpochMilliseconds == nil)
        #expect(outcome.completedAtEpochMilliseconds == self.now + 7)
    }

    @Test("an expired notification is never sent")
    func expiredBeforeSending() {
        var machine = self.machine(expiration: self.now / 1000 - 1)
        guard case .finish(let outcome) = machine.start(nowEpochMilliseconds: self.now) else {
            Issue.record("not finished")
            return
        }
        #expect(outcome.status == .expired)
        #expect(outcome.attempts == 0)
        #expect(outcome.httpStatus == nil)
    }

    @Test("expiration 0 means try once, not expired")
    func expirationZero() {
        var machine = self.machine(expiration: 0)
        #expect(machine.start(nowEpochMilliseconds: self.now) == .send)
    }

    @Test("410 Unregistered is rejected and flags the token with its timestamp")
    func unregistered() {
        var machine = self.machine()
        _ = machine.start(nowEpochMilliseconds: self.now)
        machine.sending(nowEpochMilliseconds: self.now)
        let action = machine.received(
            self.answer(410, .unregistered, since: 1_700_000_000_000), nowEpochMilliseconds: self.now)
        guard case .finish(let outcome) = action else {
            Issue.record("not finished")
            return
        }
        #expect(outcome.status == .rejected)
        #expect(outcome.httpStatus == 410)
        #expect(outcome.invalidTokenReason == "Unregistered")
        #expect(outcome.invalidSinceEpochMilliseconds == 1_700_000_000_000)
    }

    @Test("retryable answers wait with backoff, then fail after max attempts")
    func retriesThenFails() {
        var machine = self.machine(maxAttempts: 3)
        _ = machine.start(nowEpochMilliseconds: self.now)
        for attempt in 1...3 {
            machine.sending(nowEpochMilliseconds: self.now)
            let action = machine.received(self.answer(503, .serviceUnavailable), nowEpochMilliseconds: self.now)
            if attempt < 3 {
                guard case .wait(let delay) = action else {
                    Issue.record("expected a wait, got \(action)")
                    return
                }
                #expect(delay <= self.backoff.ceiling(afterAttempt: attempt))
                #expect(machine.retryDue(nowEpochMilliseconds: self.now) == .send)
            } else {
                guard case .finish(let outcome) = action else {
                    Issue.record("expected finish, got \(action)")
                    return
                }
                #expect(outcome.status == .failed)
                #expect(outcome.reason == "ServiceUnavailable")
                #expect(outcome.httpStatus == 503)
                #expect(outcome.attempts == 3)
            }
        }
    }

    @Test("timeouts are retried like 5xx and reported as RequestTimeout")
    func timeouts() {
        var machine = self.machine(maxAttempts: 1)
        _ = machine.start(nowEpochMilliseconds: self.now)
        machine.sending(nowEpochMilliseconds: self.now)
        guard case .finish(let outcome) = machine.received(.failed(.timeout), nowEpochMilliseconds: self.now)
        else {
            Issue.record("not finished")
            return
        }
        #expect(outcome.status == .failed)
        #expect(outcome.reason == "RequestTimeout")
        #expect(outcome.httpStatus == nil)
    }

    @Test("systemic answers halt the line and do not use up attempts")
    func systemic() {
        var machine = self.machine(maxAttempts: 1)
        _ = machine.start(nowEpochMilliseconds: self.now)
        for _ in 0..<5 {
            machine.sending(nowEpochMilliseconds: self.now)
            let action = machine.received(self.answer(403, .invalidProviderToken), nowEpochMilliseconds: self.now)
            #expect(action == .halt(reason: "InvalidProviderToken"))
            #expect(machine.resumed(nowEpochMilliseconds: self.now) == .send)
        }
        machine.sending(nowEpochMilliseconds: self.now)
        guard case .finish(let outcome) = machine.received(self.answer(200), nowEpochMilliseconds: self.now) else {
            Issue.record("not finished")
            return
        }
        #expect(outcome.status == .delivered)
        #expect(outcome.attempts == 1)
    }

    @Test("an unreachable APNs halts the line")
    func unreachable() {
        var machine = self.machine()
        _ = machine.start(nowEpochMilliseconds: self.now)
        machine.sending(nowEpochMilliseconds: self.now)
        let action = machine.received(.failed(.unreachable("connection refused")), nowEpochMilliseconds: self.now)
        #expect(action == .halt(reason: "APNs unreachable: connection refused"))
    }

    @Test("a second ExpiredProviderToken in a row halts instead of looping")
    func expiredProviderToken() {
        var machine = self.machine()
        _ = machine.start(nowEpochMilliseconds: self.now)
        machine.sending(nowEpochMilliseconds: self.now)
        #expect(machine.received(self.answer(403, .expiredProviderToken), nowEpochMilliseconds: self.now) == .send)
        machine.sending(nowEpochMilliseconds: self.now)
        #expect(
            machine.received(self.answer(403, .expiredProviderToken), nowEpochMilliseconds: self.now)
                == .halt(reason: "ExpiredProviderToken")
        )
    }

    @Test("ExpiredProviderToken answers that are not in a row do not halt (fuzz finding 7)")
    func expiredProviderTokenNotInARow() {
        var machine = self.machine()
        _ = machine.start(nowEpochMilliseconds: self.now)
        machine.sending(nowEpochMilliseconds: self.now)
        #expect(machine.received(self.answer(403, .expiredProviderToken), nowEpochMilliseconds: self.now) == .send)
        machine.sending(nowEpochMilliseconds: self.now)
        guard case .wait = machine.received(self.answer(503, .serviceUnavailable), nowEpochMilliseconds: self.now)
        else {
            Issue.record("a 503 is retried after a wait")
            return
        }
        #expect(machine.retryDue(nowEpochMilliseconds: self.now + 60_000) == .send)
        machine.sending(nowEpochMilliseconds: self.now + 60_000)
        #expect(
            machine.received(self.answer(403, .expiredProviderToken), nowEpochMilliseconds: self.now + 60_000) == .send,
            "the answer before it was a 503: renewed and sent again, not halted")
        machine.sending(nowEpochMilliseconds: self.now + 60_000)
        #expect(
            machine.received(self.answer(403, .expiredProviderToken), nowEpochMilliseconds: self.now + 60_000)
                == .halt(reason: "ExpiredProviderToken"))
    }

    @Test("a notification that expires while halted ends as expired")
    func expiresWhileHalted() {
        var machine = self.machine(expiration: self.now / 1000 + 60)
        _ = machine.start(nowEpochMilliseconds: self.now)
        machine.sending(nowEpochMilliseconds: self.now)
        _ = machine.received(self.answer(403, .badCertificate), nowEpochMilliseconds: self.now)
        guard case .finish(let outcome) = machine.resumed(nowEpochMilliseconds: self.now + 61_000) else {
            Issue.record("not finished")
            return
        }
        #expect(outcome.status == .expired)
    }
}

@Suite("Delivery state machine: expiry during retries")
struct DeliveryExpiryDuringRetryTests {
    @Test("a notification that would expire before its retry ends as expired with a null http status")
    func expiresBeforeRetry() {
        let now: Int64 = 1_700_000_000_000
        var machine = DeliveryStateMachine(
            expirationEpochSeconds: now / 1000 + 1, localFault: nil, maxAttempts: 5,
            backoff: Backoff(initial: .seconds(60), maximum: .seconds(60))
        )
        #expect(machine.start(nowEpochMilliseconds: now) == .send)
        machine.sending(nowEpochMilliseconds: now)
        let action = machine.received(
            .answered(APNSResponse(status: 503, reason: .serviceUnavailable, invalidSinceEpochMilliseconds: nil)),
            nowEpochMilliseconds: now
        )
        guard case .finish(let outcome) = action else {
            // A zero jitter draw may still fit before expiry; then the machine waits, which is also right.
            guard case .wait(let delay) = action else {
                Issue.record("unexpected \(action)")
                return
            }
            #expect(delay.milliseconds < 1000)
            return
        }
        #expect(outcome.status == .expired)
        #expect(outcome.httpStatus == nil)
        #expect(outcome.reason == "ServiceUnavailable")
    }
}
