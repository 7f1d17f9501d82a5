// Fuzz target: DeliveryStateMachine (Sources/BridgeCore/Delivery+StateMachine.swift), the value that decides the
// fate of one notification. The input is a notification's setup and then the life the pipeline gives it:
//   byte 0  max attempts (Int.min, 0, 1 ... 1000, Int.max)
//   byte 1  the backoff's initial wait and byte 2 its maximum (0, 1 ns ... 1 h, Int64.max seconds; never negative:
//           a wait cannot be, and the configuration admits 1 ms to 1 h)
//   byte 3  the local fault (none, every documented reason, an unknown one)
//   byte 4  the expiration in epoch seconds (none, 0, -1, Int64.min/max, past the milliseconds' range, or near
//           the start) and byte 5 how near
//   byte 6  the clock at the start (a 2027 time, 0, ±1, Int64.min/max, ...); byte 7, when a multiple of 8, has the
//           next 8 bytes replace it
// then one step per action, as the pipeline answers it (docs/architecture.md, "Deliver"): `send` is sent (with
// the clock moved on, then an answer: any status, reason, apns-unique-id and 410 timestamp, or a timeout, a lost
// connection, an unreachable APNs or a malformed answer), or it waits in its ordering line and its turn comes, or
// a newer notification supersedes it there before it was ever sent; `wait` is followed by `retryDue`, `halt` by
// `resumed`, each at a clock moved on by any amount (backwards too, wrapping at the ends of Int64). The input ends
// when the machine finishes or the bytes run out. Checks (named for FUZZ_SKIP_CHECKS, docs/fuzzing.md):
// - `attempts`: attempts stay within 0...max attempts, and count the sends except those answered systemic,
//   ExpiredProviderToken or unreachable ("a systemic answer does not use up an attempt");
// - `wait`: a wait lies within the backoff's ceiling for the attempts made, and does not outlive the expiration;
// - `send`: start, retryDue, resumed and turnCame send only what has not expired (0, negative and too far ahead
//   never expire);
// - `halt`: only a systemic answer, an unreachable APNs, or ExpiredProviderToken halts, with its reason;
// - `outcome`: the finishing outcome fits its status: delivered only on 200 or a delivered disposition; rejected
//   for a local fault (never sent, no HTTP status) or a rejecting answer (its status); failed only after max
//   attempts; expired only with a real expiration no later than the decision plus the next wait, with no HTTP
//   status; superseded never sent; completed at the deciding call's clock; sent_at the first send's clock, null
//   when never sent; an invalid-token reason only for a rejection whose reason invalidates the token;
// - `renewal-in-a-row`: ExpiredProviderToken halts only when the answer before it was ExpiredProviderToken too,
//   and is sent again otherwise (docs/operations.md, "Halting": "a second ExpiredProviderToken in a row").

import APNSCore
import BridgeCore
import FuzzSupport

/// Reads the input's bytes; past the end every read is 0 and `isAtEnd` is true.
struct ByteReader {
    let bytes: [UInt8]
    var index = 0

    var isAtEnd: Bool { self.index >= self.bytes.count }

    mutating func byte() -> UInt8 {
        defer { self.index += 1 }
        return self.index < self.bytes.count ? self.bytes[self.index] : 0
    }

    mutating func pick<T>(_ values: [T]) -> T {
        values[Int(self.byte()) % values.count]
    }

    mutating func int64() -> Int64 {
        var value: UInt64 = 0
        for _ in 0..<8 { value = value << 8 | UInt64(self.byte()) }
        return Int64(bitPattern: value)
    }
}

let maxAttemptsValues = [Int.min, -1, 0, 1, 2, 3, 5, 10, 1000, Int.max]
let durations: [Duration] = [
    .zero, .nanoseconds(1), .milliseconds(1), .milliseconds(10), .milliseconds(500), .seconds(1), .seconds(60),
    .seconds(3600), .seconds(Int64.max),
]
let statuses = [200, 400, 403, 404, 405, 410, 413, 429, 500, 503, 0, 1, 204, 302, 599, 999, -1, Int.min, Int.max]
let clockSteps: [Int64] = [0, 1, 10, 999, 1000, 1001, 60_000, 3_600_000, -1, -1000, Int64.max, Int64.min]
let timestamps: [Int64?] = [nil, 0, 1_700_000_000_000, ErrorBody.latestTimestampMilliseconds, -1, Int64.min, Int64.max]

func drawReason(_ reader: inout ByteReader) -> Reason? {
    let byte = Int(reader.byte())
    if byte < Reason.documented.count { return Reason.documented[byte] }
    return [nil, .unknown(""), .unknown("NotAReason"), .unknown("ExpiredProviderToken ")][byte % 4]
}

func result(_ reader: inout ByteReader, step: Int) -> APNSResult {
    switch reader.byte() % 10 {
    case 0: return .failed(.timeout)
    case 1: return .failed(.connectionLost)
    case 2: return .failed(.unreachable("connection refused"))
    case 3: return .failed(.malformedResponse("no :status"))
    default:
        let reason = drawReason(&reader)
        // Mostly the status APNs pairs with the reason, so the machine's common paths are reached.
        let status = reader.byte() % 4 == 0 ? reader.pick(statuses) : (reason?.status ?? reader.pick([200, 500]))
        let uniqueID = reader.byte() % 2 == 0 ? nil : "unique-\(step)"
        return .answered(
            APNSResponse(
                status: status, apnsUniqueID: uniqueID, reason: reason,
                invalidSinceEpochMilliseconds: reader.pick(timestamps)))
    }
}

/// What the machine would decide for `result`, as Reason and APNSFailure classify it.
func disposition(_ result: APNSResult) -> Disposition {
    switch result {
    case .answered(let response):
        if response.status == 200 { return .delivered }
        return (response.reason ?? .unknown("HTTP\(response.status)")).disposition(status: response.status)
    case .failed(let failure):
        return failure.disposition
    }
}

func check(
    _ name: String, _ condition: @autoclosure () -> Bool, _ message: @autoclosure () -> String, line: UInt = #line
) {
    guard FuzzChecks.enabled(name) else { return }
    precondition(condition(), "\(name): \(message())", line: line)
}

/// Whole milliseconds of `duration`, saturated at the ends of Int64.
func milliseconds(_ duration: Duration) -> Int64 {
    let (seconds, attoseconds) = duration.components
    let (whole, overflow) = seconds.multipliedReportingOverflow(by: 1000)
    if overflow { return seconds < 0 ? .min : .max }
    let (total, overflowAgain) = whole.addingReportingOverflow(attoseconds / 1_000_000_000_000_000)
    return overflowAgain ? (whole < 0 ? .min : .max) : total
}

func saturatingAdd(_ a: Int64, _ b: Int64) -> Int64 {
    let (sum, overflow) = a.addingReportingOverflow(b)
    return overflow ? (b < 0 ? .min : .max) : sum
}

func fuzzOne(_ bytes: [UInt8]) {
    var reader = ByteReader(bytes: bytes)
    let maxAttempts = reader.pick(maxAttemptsValues)
    let backoff = Backoff(initial: reader.pick(durations), maximum: reader.pick(durations))
    let faultByte = reader.byte()
    let localFault: Reason? =
        faultByte < 128
        ? nil
        : Int(faultByte - 128) < Reason.documented.count ? Reason.documented[Int(faultByte - 128)] : .unknown("Local")
    let expirationKind = reader.byte()
    let nearness = Int64(Int8(bitPattern: reader.byte()))
    var now: Int64 = reader.pick([
        1_800_000_000_000, 0, 1, -1, Int64.max, Int64.min, Int64.max - 1, 253_402_300_799_999,
    ])
    if reader.byte() % 8 == 0 { now = reader.int64() }
    let expiration: Int64? =
        switch expirationKind % 10 {
        case 0: nil
        case 1: 0
        case 2: -1
        case 3: .min
        case 4: .max
        case 5: 10_000_000_000_000_000
        case 6: Int64.max / 1000
        case 7: Int64.max / 1000 + 1
        default: now / 1000 &+ nearness
        }
    let expirationMilliseconds: Int64? = expiration.flatMap { seconds in
        guard seconds > 0 else { return nil }
        let (value, overflow) = seconds.multipliedReportingOverflow(by: 1000)
        return overflow ? nil : value
    }
    func expired(at time: Int64) -> Bool { expirationMilliseconds.map { $0 <= time } ?? false }

    var machine = DeliveryStateMachine(
        expirationEpochSeconds: expiration, localFault: localFault, maxAttempts: maxAttempts, backoff: backoff)
    let effectiveMaxAttempts = max(1, maxAttempts)
    var sends = 0
    var uncounted = 0
    var firstSentAt: Int64?
    var last: APNSResult?
    var previousWasExpiredProviderToken = false
    var action = machine.start(nowEpochMilliseconds: now)
    var decidedBy = "start"
    var step = 0

    while true {
        step += 1
        check(
            "attempts", machine.attempts >= 0 && machine.attempts <= effectiveMaxAttempts,
            "attempts \(machine.attempts) outside 0...\(effectiveMaxAttempts)")
        check(
            "attempts", machine.attempts == sends - uncounted,
            "attempts \(machine.attempts) after \(sends) sends, \(uncounted) of them not counted")
        switch action {
        case .finish(let outcome):
            checkOutcome(
                outcome, now: now, localFault: localFault, last: last, sends: sends, firstSentAt: firstSentAt,
                maxAttempts: effectiveMaxAttempts, backoff: backoff, expirationMilliseconds: expirationMilliseconds,
                decidedBy: decidedBy)
            return
        case .wait(let delay):
            check(
                "wait", delay >= .zero && delay <= backoff.ceiling(afterAttempt: machine.attempts),
                "wait \(delay) outside 0...\(backoff.ceiling(afterAttempt: machine.attempts))")
            check(
                "wait", !expired(at: saturatingAdd(now, milliseconds(delay))),
                "a wait of \(delay) at \(now) outlives the expiration \(expiration.map(String.init) ?? "none")")
            if reader.isAtEnd { return }
            now = reader.byte() % 2 == 0 ? saturatingAdd(now, milliseconds(delay)) : now &+ reader.pick(clockSteps)
            action = machine.retryDue(nowEpochMilliseconds: now)
            decidedBy = "retryDue"
        case .halt(let reason):
            let halting = last.map(disposition)
            switch last {
            case .answered(let response)?:
                check(
                    "halt", halting == .systemic || halting == .renewToken,
                    "halted (\(reason)) on an answer that is \(halting.map { "\($0)" } ?? "none")")
                check(
                    "halt", reason == (response.reason ?? .unknown("HTTP\(response.status)")).rawValue,
                    "halt reason \(reason) for \(response)")
            case .failed(let failure)?:
                check("halt", failure.disposition == .systemic, "halted on \(failure)")
                check("halt", reason.hasPrefix("APNs unreachable: "), "halt reason \(reason) for \(failure)")
            case nil:
                check("halt", false, "halted before anything was sent")
            }
            if reader.isAtEnd { return }
            now = now &+ reader.pick(clockSteps)
            action = machine.resumed(nowEpochMilliseconds: now)
            decidedBy = "resumed"
        case .send:
            if decidedBy != "received" {
                check(
                    "send", !expired(at: now),
                    "\(decidedBy) sent at \(now) past the expiration \(expiration.map(String.init) ?? "none")")
            }
            if reader.isAtEnd { return }
            let choice = reader.byte()
            if choice % 8 == 7 {
                // It waits in its ordering line: a newer one supersedes it there, or its turn comes.
                now = now &+ reader.pick(clockSteps)
                if sends == 0, reader.byte() % 2 == 0 {
                    let outcome = machine.superseded(by: "newer", nowEpochMilliseconds: now)
                    check(
                        "outcome",
                        outcome.status == .superseded && outcome.supersededBy == "newer" && outcome.attempts == 0
                            && outcome.httpStatus == nil && outcome.reason == nil
                            && outcome.firstSentAtEpochMilliseconds == nil
                            && outcome.completedAtEpochMilliseconds == now
                            && outcome.invalidTokenReason == nil,
                        "superseded outcome \(outcome)")
                    return
                }
                action = machine.turnCame(nowEpochMilliseconds: now)
                decidedBy = "turnCame"
                continue
            }
            machine.sending(nowEpochMilliseconds: now)
            sends += 1
            if firstSentAt == nil { firstSentAt = now }
            now = now &+ reader.pick(clockSteps)
            let answer = result(&reader, step: step)
            last = answer
            let answerDisposition = disposition(answer)
            let attemptsBefore = machine.attempts
            action = machine.received(answer, nowEpochMilliseconds: now)
            decidedBy = "received"
            switch answerDisposition {
            case .systemic, .renewToken:
                uncounted += 1
                check(
                    "attempts", machine.attempts == attemptsBefore - 1,
                    "a \(answerDisposition) answer used up an attempt")
            default:
                break
            }
            if answerDisposition == .renewToken {
                if previousWasExpiredProviderToken {
                    check(
                        "renewal-in-a-row", action == .halt(reason: "ExpiredProviderToken"),
                        "a second ExpiredProviderToken in a row decided \(action)")
                } else {
                    check(
                        "renewal-in-a-row", action == .send,
                        "the first ExpiredProviderToken in a row (after \(sends) sends) decided \(action)")
                }
            }
            previousWasExpiredProviderToken = answerDisposition == .renewToken
        }
    }
}

func checkOutcome(
    _ outcome: DeliveryOutcome, now: Int64, localFault: Reason?, last: APNSResult?, sends: Int, firstSentAt: Int64?,
    maxAttempts: Int, backoff: Backoff, expirationMilliseconds: Int64?, decidedBy: String
) {
    check("outcome", outcome.completedAtEpochMilliseconds == now, "completed at \(outcome), decided at \(now)")
    check("outcome", outcome.supersededBy == nil, "\(outcome.status) names a replacement")
    check(
        "outcome", outcome.firstSentAtEpochMilliseconds == firstSentAt,
        "sent_at \(outcome.firstSentAtEpochMilliseconds.map(String.init) ?? "null"), first sent at "
            + "\(firstSentAt.map(String.init) ?? "never")")
    if let invalid = outcome.invalidTokenReason {
        check(
            "outcome", outcome.status == .rejected && Reason(rawValue: invalid).invalidatesToken,
            "invalid-token reason \(invalid) on \(outcome.status)")
    }
    if outcome.invalidSinceEpochMilliseconds != nil {
        check("outcome", outcome.invalidTokenReason != nil, "a 410 timestamp without an invalid token")
    }
    let answered: APNSResponse? = if case .answered(let response)? = last { response } else { nil }
    switch outcome.status {
    case .delivered:
        check(
            "outcome", decidedBy == "received" && last.map(disposition) == .delivered,
            "delivered after \(decidedBy), last answer \(last.map { "\($0)" } ?? "none")")
        check("outcome", outcome.httpStatus == answered?.status && outcome.reason == nil, "delivered as \(outcome)")
        check("outcome", outcome.attempts >= 1, "delivered with \(outcome.attempts) attempts")
    case .rejected:
        if let localFault {
            check(
                "outcome",
                decidedBy == "start" && sends == 0 && outcome.httpStatus == nil && outcome.reason == localFault.rawValue
                    && outcome.attempts == 0,
                "a local fault \(localFault) decided \(outcome) after \(decidedBy)")
        } else {
            check(
                "outcome", decidedBy == "received" && last.map(disposition) == .rejected,
                "rejected after \(decidedBy), last answer \(last.map { "\($0)" } ?? "none")")
            check(
                "outcome", outcome.httpStatus == answered?.status,
                "rejected as \(outcome) for \(String(describing: last))")
        }
    case .failed:
        check(
            "outcome", decidedBy == "received" && last.map(disposition) == .retryable,
            "failed after \(decidedBy), last answer \(last.map { "\($0)" } ?? "none")")
        check("outcome", outcome.attempts == maxAttempts, "failed after \(outcome.attempts) of \(maxAttempts) attempts")
    case .expired:
        check("outcome", outcome.httpStatus == nil, "expired with HTTP status \(outcome.httpStatus ?? 0)")
        // Decided at a send (the expiration passed) or at a retryable answer (it would pass during the wait).
        let horizon = saturatingAdd(now, milliseconds(backoff.ceiling(afterAttempt: outcome.attempts)))
        check(
            "outcome", expirationMilliseconds.map { $0 <= horizon } ?? false,
            "expired at \(now) with expiration \(expirationMilliseconds.map(String.init) ?? "none")")
    case .superseded:
        check("outcome", false, "superseded outside a line")
    }
}

#if PUSHBRIDGE_LIBFUZZER
    @_cdecl("LLVMFuzzerTestOneInput")
    public func fuzzerTestOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
        fuzzOne(size == 0 ? [] : Array(UnsafeBufferPointer(start: data, count: size)))
        return 0
    }
#else
    @main
    struct FuzzDeliveryStateMachineMain {
        static func main() {
            FuzzDriver.main(target: "FuzzDeliveryStateMachine", fuzzOne)
        }
    }
#endif
