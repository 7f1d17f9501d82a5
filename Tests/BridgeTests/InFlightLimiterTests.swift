@testable import Bridge
import Synchronization
import Testing

@Suite("In-flight limiter")
struct InFlightLimiterTests {
    @Test("never hands out more permits than the limit, and every waiter gets one in the end")
    func boundsPermits() async {
        let limiter = InFlightLimiter(limit: 8)
        let counts = Counts()
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<200 {
                group.addTask {
                    await limiter.acquire()
                    counts.enter()
                    await Task.yield()
                    counts.leave()
                    limiter.release()
                }
            }
        }
        #expect(counts.highest <= 8)
        #expect(counts.highest >= 1)
        #expect(limiter.inFlight == 0)
    }

    @Test("reports full once when the bound is reached, and room once it falls to three quarters")
    func fullAndRoom() async throws {
        let events = Events()
        let limiter = InFlightLimiter(
            limit: 4,
            onFull: { events.append("full") },
            onRoom: { events.append("room") }
        )
        for _ in 0..<4 { await limiter.acquire() }
        let waiter = Task { await limiter.acquire() }
        while events.all.isEmpty { await Task.yield() }
        #expect(events.all == ["full"])
        limiter.release()  // passes straight to the waiter: still 4 out
        await waiter.value
        #expect(limiter.inFlight == 4)
        limiter.release()  // 3 out: three quarters of 4
        #expect(events.all == ["full", "room"])
        for _ in 0..<3 { limiter.release() }
        #expect(limiter.inFlight == 0)
    }

    @Test("waitUntilEmpty returns true once drained and false on timeout")
    func waitUntilEmpty() async {
        let limiter = InFlightLimiter(limit: 2)
        await limiter.acquire()
        let timedOut = await limiter.waitUntilEmpty(timeout: .milliseconds(50))
        #expect(!timedOut)
        let drained = Task { await limiter.waitUntilEmpty(timeout: .seconds(10)) }
        try? await Task.sleep(for: .milliseconds(20))
        limiter.release()
        #expect(await drained.value)
    }
}

/// How many tasks are inside a section at once, and the most ever seen.
private final class Counts: Sendable {
    private let state = Mutex((current: 0, highest: 0))
    func enter() { self.state.withLock { $0.current += 1; $0.highest = max($0.highest, $0.current) } }
    func leave() { self.state.withLock { $0.current -= 1 } }
    var highest: Int { self.state.withLock { $0.highest } }
}

/// Callback names in the order they were heard.
private final class Events: Sendable {
    private let names = Mutex<[String]>([])
    func append(_ name: String) { self.names.withLock { $0.append(name) } }
    var all: [String] { self.names.withLock { $0 } }
}
