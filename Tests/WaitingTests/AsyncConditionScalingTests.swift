import Synchronization
import Testing

@testable import Waiting

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Waking many waiters at once costs time linear in their number: it runs under the lock every change takes. The
/// work is counted where the condition can count it; the one timing compares two sizes on the same thread's CPU
/// clock, so a loaded host cannot make it pass or fail.
@Suite("Async condition at scale", .timeLimit(.minutes(1)))
struct AsyncConditionScalingTests {
    static let waiterCount = 100_000

    /// Registers `count` waiters the way a suspended wait does, straight in the condition's storage (100 000
    /// suspended tasks would measure the scheduler, not the condition). Waiter `number` waits in turn when
    /// `inTurn(number)`, and holds when `holds(number, &state)`; `checks` counts its checks and `resumed` its
    /// resumptions.
    static func register(
        _ count: Int,
        on condition: AsyncCondition<Int>,
        checks: Count,
        resumed: Count,
        inTurn: @escaping @Sendable (Int) -> Bool = { _ in false },
        holds: @escaping @Sendable (Int, inout Int) -> Bool
    ) {
        condition.storage.withLock { storage in
            for number in 0..<count {
                storage.nextID &+= 1
                let waiter = AsyncCondition<Int>.Waiter(
                    id: storage.nextID,
                    inTurn: inTurn(number),
                    check: { state in
                        checks.increment()
                        guard holds(number, &state) else { return nil }
                        return { resumed.increment() }
                    },
                    abandon: {})
                storage.waiters.append(waiter)
                if waiter.inTurn { storage.inTurnCount += 1 }
            }
        }
    }

    @Test("one change resumes 100 000 in-turn waiters, each checked once, none moved")
    func wakeAllInTurn() {
        let condition = AsyncCondition(0)
        let checks = Count()
        let resumed = Count()
        Self.register(Self.waiterCount, on: condition, checks: checks, resumed: resumed, inTurn: { _ in true }) {
            _, tokens in
            guard tokens > 0 else { return false }
            tokens -= 1
            return true
        }
        condition.withLock { $0 = Self.waiterCount }
        #expect(resumed.value == Self.waiterCount)
        #expect(checks.value == Self.waiterCount)
        #expect(condition.storage.withLock { $0.waitersMoved } == 0)
        #expect(condition.waiting == 0)
        #expect(condition.read { $0 } == 0)
    }

    @Test("a change that resumes every other of 100 000 waiters moves each one left at most once")
    func wakeEveryOther() {
        let condition = AsyncCondition(0)
        let checks = Count()
        let resumed = Count()
        // The even ones hold once the state is 1, the odd ones once it is 2.
        Self.register(Self.waiterCount, on: condition, checks: checks, resumed: resumed) { number, state in
            state == (number.isMultiple(of: 2) ? 1 : 2)
        }
        condition.withLock { $0 = 1 }
        let half = Self.waiterCount / 2
        #expect(resumed.value == half)
        #expect(checks.value == Self.waiterCount)
        #expect(condition.waiting == half)
        #expect(condition.storage.withLock { $0.waitersMoved } <= half, "each waiter left moves once at most")
        condition.withLock { $0 = 2 }
        #expect(resumed.value == Self.waiterCount)
        #expect(checks.value == Self.waiterCount + half)
        #expect(condition.storage.withLock { $0.waitersMoved } <= half, "resuming the rest moves none")
        #expect(condition.waiting == 0)
    }

    /// The CPU time this thread spent in the one change that resumes every other of `count` waiters; the least of
    /// `rounds` tries (what the work costs, not what other processes took from it).
    static func cpuTimeToWakeEveryOther(of count: Int, rounds: Int) -> Duration {
        var least = Duration.seconds(Int64.max)
        for _ in 0..<rounds {
            let condition = AsyncCondition(0)
            Self.register(count, on: condition, checks: Count(), resumed: Count()) { number, state in
                number.isMultiple(of: 2) && state == 1
            }
            let start = Self.threadCPUTime()
            condition.withLock { $0 = 1 }
            least = min(least, Self.threadCPUTime() - start)
            #expect(condition.waiting == count / 2)
        }
        return least
    }

    /// CPU time this thread has used: the change runs on the calling thread, and other threads and processes do not
    /// count.
    static func threadCPUTime() -> Duration {
        var time = timespec()
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &time)
        return .seconds(Int64(time.tv_sec)) + .nanoseconds(Int64(time.tv_nsec))
    }

    @Test("resuming every other of 100 000 waiters costs about ten times what 10 000 cost, not a hundred")
    func linearInCPUTime() {
        // The counts above cannot see an array that moves its elements itself: removing one resumed waiter at a
        // time moves all behind it (2.9 s of CPU for 100 000 here, a ratio of 108). Linear is a ratio of about 10
        // (11 here, also with every core busy); 30 leaves room for caches (100 000 waiters do not fit where 10 000
        // do).
        let small = Self.cpuTimeToWakeEveryOther(of: Self.waiterCount / 10, rounds: 5)
        let large = Self.cpuTimeToWakeEveryOther(of: Self.waiterCount, rounds: 3)
        let ratio = large / small
        #expect(ratio < 30, "100 000 waiters took \(large), 10 000 took \(small)")
    }

    @Test("a change that resumes nobody moves nobody")
    func wakeNobody() {
        let condition = AsyncCondition(0)
        let checks = Count()
        let resumed = Count()
        Self.register(1_000, on: condition, checks: checks, resumed: resumed) { _, state in state == 1 }
        for _ in 0..<10 { condition.withLock { _ in } }
        #expect(resumed.value == 0)
        #expect(checks.value == 10_000)
        #expect(condition.storage.withLock { $0.waitersMoved } == 0)
        #expect(condition.waiting == 1_000)
    }
}
