import APNSCore

/// The fate of one notification: what the pipeline publishes when it is decided.
package struct DeliveryOutcome: Sendable, Hashable {
    /// The outcome record's status.
    package var status: OutcomeStatus
    /// APNs' HTTP status, `nil` when APNs did not answer.
    package var httpStatus: Int?
    /// Apple's reason string when not delivered.
    package var reason: String?
    /// `apns-unique-id`, when APNs sent one.
    package var apnsUniqueID: String?
    /// How many times the notification was sent.
    package var attempts: Int
    /// When it was first sent (ms since the epoch), `nil` when never sent.
    package var firstSentAtEpochMilliseconds: Int64?
    /// When the fate was decided (ms since the epoch).
    package var completedAtEpochMilliseconds: Int64
    /// Set when the token must be published as invalid: Apple's reason.
    package var invalidTokenReason: String?
    /// The 410 timestamp, when APNs gave one.
    package var invalidSinceEpochMilliseconds: Int64?
    /// For `superseded`: the id of the notification that replaced it.
    package var supersededBy: String? = nil
}

/// Decides, answer by answer, what happens to one notification: send, wait and retry, halt the line, or
/// finish with an outcome (docs/data-contract.md, docs/operations.md "Guarantees"). A value type without I/O, so every path is tested as plain values.
/// `package` for its fuzz target, `Fuzz/FuzzDeliveryStateMachine` (docs/fuzzing.md).
package struct DeliveryStateMachine: Sendable {
    package enum Action: Sendable, Hashable {
        /// Send (again) now.
        case send
        /// Wait, then call ``retryDue(nowEpochMilliseconds:)``.
        case wait(Duration)
        /// APNs refuses the provider itself: stop the line for this reason, then probe.
        case halt(reason: String)
        /// Decided: publish the outcome.
        case finish(DeliveryOutcome)
    }

    let expirationEpochSeconds: Int64?
    let localFault: Reason?
    package let maxAttempts: Int
    let backoff: Backoff
    package private(set) var attempts = 0
    private(set) var firstSentAtEpochMilliseconds: Int64?
    /// Consecutive `ExpiredProviderToken` answers; the client already renewed the token once.
    private var renewals = 0

    package init(expirationEpochSeconds: Int64?, localFault: Reason?, maxAttempts: Int, backoff: Backoff) {
        self.expirationEpochSeconds = expirationEpochSeconds
        self.localFault = localFault
        self.maxAttempts = max(1, maxAttempts)
        self.backoff = backoff
    }

    /// The first decision, before anything is sent.
    package mutating func start(nowEpochMilliseconds now: Int64) -> Action {
        if let fault = self.localFault {
            return .finish(
                self.outcome(
                    .rejected, http: nil, reason: fault.rawValue, uniqueID: nil, now: now,
                    invalidToken: fault.invalidatesToken ? fault.rawValue : nil
                )
            )
        }
        return self.sendUnlessExpired(now: now)
    }

    /// A wait asked for by ``Action/wait(_:)`` is over.
    package mutating func retryDue(nowEpochMilliseconds now: Int64) -> Action {
        self.sendUnlessExpired(now: now)
    }

    /// The line was halted and has resumed (or the probe is due): send again, unless expired meanwhile.
    package mutating func resumed(nowEpochMilliseconds now: Int64) -> Action {
        self.sendUnlessExpired(now: now)
    }

    /// Its turn came after it waited behind an earlier notification of its ordering key: send, unless it
    /// expired meanwhile.
    package mutating func turnCame(nowEpochMilliseconds now: Int64) -> Action {
        self.sendUnlessExpired(now: now)
    }

    /// The outcome of a notification that a newer one of its ordering key replaced while it waited (a route with
    /// `coalesce: true`). It was never sent: no status, no reason, no attempts.
    package func superseded(by notificationID: String, nowEpochMilliseconds now: Int64) -> DeliveryOutcome {
        var outcome = self.outcome(.superseded, http: nil, reason: nil, uniqueID: nil, now: now)
        outcome.supersededBy = notificationID
        return outcome
    }

    /// Record that the request is going out now.
    package mutating func sending(nowEpochMilliseconds now: Int64) {
        self.attempts += 1
        if self.firstSentAtEpochMilliseconds == nil { self.firstSentAtEpochMilliseconds = now }
    }

    /// APNs' answer (or its absence) to the last send.
    package mutating func received(_ result: APNSResult, nowEpochMilliseconds now: Int64) -> Action {
        // Only `ExpiredProviderToken` answers in a row count: any other answer starts the count again.
        let renewalsInARow = self.renewals
        self.renewals = 0
        switch result {
        case .answered(let response):
            let status = response.status
            let uniqueID = response.apnsUniqueID
            let invalidSince = response.invalidSinceEpochMilliseconds
            if status == 200 {
                return .finish(self.outcome(.delivered, http: 200, reason: nil, uniqueID: uniqueID, now: now))
            }
            let reason = response.reason ?? .unknown("HTTP\(status)")
            switch reason.disposition(status: status) {
            case .delivered:
                return .finish(self.outcome(.delivered, http: status, reason: nil, uniqueID: uniqueID, now: now))
            case .rejected:
                var outcome = self.outcome(
                    .rejected, http: status, reason: reason.rawValue, uniqueID: uniqueID, now: now,
                    invalidToken: reason.invalidatesToken ? reason.rawValue : nil
                )
                outcome.invalidSinceEpochMilliseconds = reason.invalidatesToken ? invalidSince : nil
                return .finish(outcome)
            case .retryable:
                return self.retryOrFail(http: status, reason: reason.rawValue, uniqueID: uniqueID, now: now)
            case .systemic:
                // A systemic answer says nothing about this notification: it does not use up an attempt.
                self.attempts -= 1
                return .halt(reason: reason.rawValue)
            case .renewToken:
                // The client renews and retries once itself; a second expiry in a row means the key or
                // the clock is wrong, which no retry fixes.
                self.attempts -= 1
                self.renewals = renewalsInARow + 1
                return self.renewals > 1 ? .halt(reason: reason.rawValue) : .send
            }
        case .failed(let failure):
            if case .unreachable(let detail) = failure {
                self.attempts -= 1
                return .halt(reason: "APNs unreachable: \(detail)")
            }
            return self.retryOrFail(http: nil, reason: failure.reason, uniqueID: nil, now: now)
        }
    }

    private mutating func retryOrFail(http: Int?, reason: String, uniqueID: String?, now: Int64) -> Action {
        if self.attempts >= self.maxAttempts {
            return .finish(self.outcome(.failed, http: http, reason: reason, uniqueID: uniqueID, now: now))
        }
        let delay = self.backoff.delay(afterAttempt: self.attempts)
        let (retryAt, overflow) = now.addingReportingOverflow(delay.milliseconds)
        if self.wouldExpire(before: overflow ? .max : retryAt) {
            // Waiting would outlive the notification: decide now rather than send something stale. The last
            // answer's reason stays as a clue; `http_status` is null for every expired outcome (docs/data-contract.md).
            return .finish(self.outcome(.expired, http: nil, reason: reason, uniqueID: uniqueID, now: now))
        }
        return .wait(delay)
    }

    private func sendUnlessExpired(now: Int64) -> Action {
        if self.wouldExpire(before: now) {
            return .finish(self.outcome(.expired, http: nil, reason: nil, uniqueID: nil, now: now))
        }
        return .send
    }

    /// Whether `apns-expiration` is past at `epochMilliseconds`. `0` means "try once, don't store": it never
    /// expires before the first send. The expiration comes from events, so it may be any `Int64`: one too far
    /// ahead to count in milliseconds never expires.
    private func wouldExpire(before epochMilliseconds: Int64) -> Bool {
        guard let expiration = self.expirationEpochSeconds, expiration > 0 else { return false }
        let (expirationMilliseconds, overflow) = expiration.multipliedReportingOverflow(by: 1000)
        return !overflow && expirationMilliseconds <= epochMilliseconds
    }

    private func outcome(
        _ status: OutcomeStatus, http: Int?, reason: String?, uniqueID: String?, now: Int64,
        invalidToken: String? = nil
    ) -> DeliveryOutcome {
        DeliveryOutcome(
            status: status, httpStatus: http, reason: reason, apnsUniqueID: uniqueID, attempts: self.attempts,
            firstSentAtEpochMilliseconds: self.firstSentAtEpochMilliseconds, completedAtEpochMilliseconds: now,
            invalidTokenReason: invalidToken, invalidSinceEpochMilliseconds: nil
        )
    }
}

extension Duration {
    /// Whole milliseconds, rounded down; saturated at `Int64.min`/`.max` for durations too long to count so.
    var milliseconds: Int64 { self.saturated(unitsPerSecond: 1000) }
}
