import Synchronization
import TestWaiting
import Testing
import Waiting

/// A count tasks can share.
final class Count: Sendable {
    private let atomic = Atomic(0)
    func increment() { self.atomic.add(1, ordering: .relaxed) }
    var value: Int { self.atomic.load(ordering: .relaxed) }
}

/// A list tasks can append to.
final class Log: Sendable {
    private let entries = Mutex<[Int]>([])
    func append(_ entry: Int) { self.entries.withLock { $0.append(entry) } }
    var values: [Int] { self.entries.withLock { $0 } }
}

@Suite("Async condition")
struct AsyncConditionTests {
    /// Takes one token when there is one.
    @Sendable static func takeToken(_ tokens: inout Int) -> Int? {
        guard tokens > 0 else { return nil }
        tokens -= 1
        return tokens
    }

    @Test("a condition that holds now returns at once, without registering")
    func holdsNow() async {
        let condition = AsyncCondition(1)
        let result = await condition.wait(until: Self.takeToken)
        #expect(result.value == 0)
        #expect(condition.waiting == 0)
        #expect(condition.read { $0 } == 0)
    }

    @Test("a waiter resumes after the change that makes its condition hold, not after a read")
    func resumesOnChange() async throws {
        let condition = AsyncCondition(0)
        let waiter = Task { await condition.wait(until: Self.takeToken) }
        try await waitUntil { condition.waiting == 1 }
        _ = condition.read { $0 }
        condition.withLock { _ in }  // a change that satisfies nobody
        try await Task.sleep(for: .milliseconds(20))
        #expect(condition.waiting == 1)
        condition.withLock { $0 += 1 }
        #expect(await waiter.value.value == 0)
        #expect(condition.waiting == 0)
    }

    @Test("one change resumes every waiter whose condition holds")
    func resumesAll() async throws {
        let condition = AsyncCondition(false)
        let resumed = Count()
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<50 {
                group.addTask {
                    if await condition.wait(until: { $0 ? () : nil }).value != nil {
                        resumed.increment()
                    }
                }
            }
            try? await waitUntil { condition.waiting == 50 }
            #expect(resumed.value == 0)
            condition.withLock { $0 = true }
        }
        #expect(resumed.value == 50)
    }

    @Test("in-turn waiters are served one per token, oldest first")
    func inTurnOrder() async throws {
        let condition = AsyncCondition(0)
        let order = Log()
        let waiters = (0..<5).map { number in
            Task {
                // Registered one after the other: each task starts once the previous one waits.
                _ = await condition.wait(inTurn: true, until: Self.takeToken)
                order.append(number)
            }
        }
        try await waitUntil { condition.waiting == 5 }
        // The tasks may have registered in any order; read that order from who is served.
        for served in 1...5 {
            condition.withLock { $0 += 1 }
            try await waitUntil { order.values.count == served }
            #expect(condition.waiting == 5 - served)
        }
        for waiter in waiters { await waiter.value }
        #expect(Set(order.values) == Set(0..<5))
    }

    @Test("a later in-turn waiter does not overtake an earlier one; other waiters do")
    func noOvertaking() async throws {
        // The state: (tokens, flag). The first in-turn waiter needs two tokens, the second one.
        struct State: Sendable {
            var tokens = 0
            var flag = false
        }
        let condition = AsyncCondition(State())
        let first = Task {
            await condition.wait(inTurn: true) { state -> Int? in
                guard state.tokens >= 2 else { return nil }
                state.tokens -= 2
                return 2
            }
        }
        try await waitUntil { condition.waiting == 1 }
        let second = Task {
            await condition.wait(inTurn: true) { state -> Int? in
                guard state.tokens >= 1 else { return nil }
                state.tokens -= 1
                return 1
            }
        }
        try await waitUntil { condition.waiting == 2 }
        let bystander = Task { await condition.wait { $0.flag ? () : nil } }
        try await waitUntil { condition.waiting == 3 }
        condition.withLock {
            $0.tokens = 1
            $0.flag = true
        }
        #expect(await bystander.value.value != nil)
        #expect(condition.waiting == 2)
        #expect(condition.read { $0.tokens } == 1)
        // A new in-turn waiter whose condition holds still waits behind the first.
        let third = Task {
            await condition.wait(inTurn: true) { state -> Int? in
                guard state.tokens >= 1 else { return nil }
                state.tokens -= 1
                return 3
            }
        }
        try await waitUntil { condition.waiting == 3 }
        condition.withLock { $0.tokens += 2 }
        #expect(await first.value.value == 2)
        #expect(await second.value.value == 1)
        #expect(condition.waiting == 1)
        condition.withLock { $0.tokens += 1 }
        #expect(await third.value.value == 3)
    }

    @Test("settle runs after the waiters were checked, with how many in-turn waiters are left")
    func settleSeesWaiters() async throws {
        let condition = AsyncCondition(0)
        let waiters = (0..<3).map { _ in Task { await condition.wait(inTurn: true, until: Self.takeToken) } }
        try await waitUntil { condition.waiting == 3 }
        let seen = Log()
        condition.withLock({ $0 += 2 }, settle: { tokens, left in seen.append(left * 10 + tokens) })
        #expect(seen.values == [10])
        condition.withLock({ $0 += 1 }, settle: { tokens, left in seen.append(left * 10 + tokens) })
        #expect(seen.values == [10, 0])
        var remaining: [Int] = []
        for waiter in waiters { remaining.append(await waiter.value.value ?? -1) }
        #expect(remaining.sorted() == [0, 0, 1])
    }

    @Test("a cancelled waiter returns at once, and its condition is never checked again")
    func cancellation() async throws {
        let condition = AsyncCondition(0)
        let checks = Count()
        let waiter = Task {
            await condition.wait { tokens -> Int? in
                checks.increment()
                return Self.takeToken(&tokens)
            }
        }
        try await waitUntil { condition.waiting == 1 }
        waiter.cancel()
        guard case .cancelled = await waiter.value else {
            Issue.record("the wait did not end as cancelled")
            return
        }
        #expect(condition.waiting == 0)
        let before = checks.value
        condition.withLock { $0 += 1 }
        #expect(checks.value == before)
        #expect(condition.read { $0 } == 1)
    }

    /// Two in-turn waiters, the first needing two tokens and the second one, with one token there: the second is
    /// blocked only by the first. Returns both waits once they are registered, in that order.
    static func inTurnBehindHead(
        _ condition: AsyncCondition<Int>
    ) async throws -> (head: Task<AsyncCondition<Int>.WaitResult<Int>, Never>, next: Task<Int?, Never>) {
        let head = Task {
            await condition.wait(inTurn: true) { tokens -> Int? in
                guard tokens >= 2 else { return nil }
                tokens -= 2
                return 2
            }
        }
        try await waitUntil { condition.waiting == 1 }
        let next = Task { await condition.wait(inTurn: true, until: Self.takeToken).value }
        try await waitUntil { condition.waiting == 2 }
        condition.withLock { $0 += 1 }
        #expect(condition.waiting == 2, "one token is not enough for the head, and the next one waits behind it")
        return (head, next)
    }

    /// The value of `wait`, which is cancelled (and returns `nil`) when `timeout` passes first.
    static func value(of wait: Task<Int?, Never>, cancelledAfter timeout: Duration) async -> Int? {
        let timer = Task {
            try await Task.sleep(for: timeout)
            wait.cancel()
        }
        defer { timer.cancel() }
        return await wait.value
    }

    @Test("cancelling the in-turn waiter at the head resumes the next one when its condition holds")
    func cancelledHeadResumesNext() async throws {
        let condition = AsyncCondition(0)
        let (head, next) = try await Self.inTurnBehindHead(condition)
        head.cancel()
        guard case .cancelled = await head.value else {
            Issue.record("the head did not end as cancelled")
            return
        }
        // No change comes: only the removal of the head can wake the next waiter.
        let resumed = await Self.value(of: next, cancelledAfter: .seconds(10))
        #expect(resumed == 0, "the next in-turn waiter took the token")
        #expect(condition.waiting == 0)
        #expect(condition.read { $0 } == 0)
    }

    @Test("an in-turn waiter at the head that times out resumes the next one when its condition holds")
    func timedOutHeadResumesNext() async throws {
        // The head's deadline must pass after the next waiter registered behind it, which a loaded host can delay
        // by seconds: a try whose head timed out first is repeated with a deadline four times longer.
        for seconds in [1, 4, 16, 64] {
            let condition = AsyncCondition(0)
            let deadline = ContinuousClock.now + .seconds(seconds)
            let head = Task {
                await condition.wait(inTurn: true, deadline: deadline) { tokens -> Int? in
                    guard tokens >= 2 else { return nil }
                    tokens -= 2
                    return 2
                }
            }
            // A loaded host may not poll again before the deadline: then the head is gone, and the try is repeated.
            try await waitUntil { condition.waiting == 1 || ContinuousClock.now > deadline }
            guard condition.waiting == 1, ContinuousClock.now < deadline else {
                _ = await head.value
                continue
            }
            let next = Task { await condition.wait(inTurn: true, until: Self.takeToken).value }
            try await waitUntil { condition.waiting == 2 || (ContinuousClock.now > deadline && condition.waiting < 2) }
            guard condition.waiting == 2 else {
                // The head timed out before the next waiter came: it is alone in line.
                next.cancel()
                _ = await head.value
                continue
            }
            condition.withLock { $0 += 1 }
            #expect(condition.waiting == 2, "one token is not enough for the head, and the next one waits behind it")
            guard case .timedOut = await head.value else {
                Issue.record("the head did not time out")
                return
            }
            let resumed = await Self.value(of: next, cancelledAfter: .seconds(10))
            #expect(resumed == 0, "the next in-turn waiter took the token")
            #expect(condition.waiting == 0)
            return
        }
        Issue.record("the head timed out before the next waiter registered, even with a 64 s deadline")
    }

    @Test("a task cancelled before it waits does not wait")
    func cancelledBefore() async {
        let condition = AsyncCondition(0)
        let waiter = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            return await condition.wait(until: Self.takeToken)
        }
        guard case .cancelled = await waiter.value else {
            Issue.record("a cancelled task waited")
            return
        }
        #expect(condition.waiting == 0)
    }

    @Test("a wait with a deadline times out, and is satisfied when the change comes first")
    func deadline() async throws {
        let condition = AsyncCondition(0)
        let start = ContinuousClock.now
        guard case .timedOut = await condition.wait(deadline: start + .milliseconds(50), until: Self.takeToken) else {
            Issue.record("no time-out")
            return
        }
        #expect(ContinuousClock.now - start >= .milliseconds(50))
        #expect(condition.waiting == 0)
        // A past deadline still checks the condition once.
        condition.withLock { $0 = 1 }
        #expect(await condition.wait(deadline: start, until: Self.takeToken).value == 0)
        guard case .timedOut = await condition.wait(deadline: start, until: Self.takeToken) else {
            Issue.record("a past deadline waited")
            return
        }
        let waiter = Task { await condition.wait(deadline: .now + .seconds(60), until: Self.takeToken) }
        try await waitUntil { condition.waiting == 1 }
        condition.withLock { $0 += 1 }
        #expect(await waiter.value.value == 0)
    }

    @Test("a cancelled wait with a deadline ends as cancelled, not timed out")
    func cancelledWithDeadline() async throws {
        let condition = AsyncCondition(0)
        let waiter = Task { await condition.wait(deadline: .now + .seconds(60), until: Self.takeToken) }
        try await waitUntil { condition.waiting == 1 }
        waiter.cancel()
        guard case .cancelled = await waiter.value else {
            Issue.record("not cancelled")
            return
        }
        #expect(condition.waiting == 0)
    }

    @Test("tokens are neither lost nor handed out twice under concurrent waits, cancels and deadlines")
    func conservation() async throws {
        struct Supply: Sendable {
            var tokens = 0
            var closed = false
        }
        let condition = AsyncCondition(Supply())
        let given = 2_000
        let taken = Count()
        await withTaskGroup(of: Void.self) { group in
            for consumer in 0..<8 {
                group.addTask {
                    // Ends when the supply closes; the number of rounds is a bound, not the plan.
                    for round in 0..<100_000 {
                        let deadline: ContinuousClock.Instant? =
                            (consumer + round) % 3 == 0 ? .now + .microseconds(200) : nil
                        let wait = Task {
                            await condition.wait(inTurn: consumer % 2 == 0, deadline: deadline) { supply -> Bool? in
                                if supply.tokens > 0 {
                                    supply.tokens -= 1
                                    return true
                                }
                                return supply.closed ? false : nil
                            }
                        }
                        if (consumer * 7 + round) % 5 == 0 { wait.cancel() }
                        switch await wait.value {
                        case .satisfied(true): taken.increment()
                        case .satisfied(false): return
                        case .timedOut, .cancelled: break
                        }
                    }
                }
            }
            group.addTask {
                for _ in 0..<given {
                    condition.withLock { $0.tokens += 1 }
                    await Task.yield()
                }
                condition.withLock { $0.closed = true }
            }
        }
        #expect(condition.waiting == 0)
        #expect(taken.value + condition.read { $0.tokens } == given)
        #expect(taken.value > 0)
    }
}
