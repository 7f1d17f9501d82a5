import Testing

@testable import BridgeCore

/// The hot path's monotonic readings (`Duration`s since the first one) convert to and from the clock's instants.
struct MonotonicTimeTests {
    @Test("a reading converts to its instant and back, and differences are the clock's")
    func roundTrip() {
        let instant = ContinuousClock.now
        let reading = MonotonicTime(instant)
        #expect(reading.instant == instant)
        let later = MonotonicTime(instant + .milliseconds(1500))
        #expect(later - reading == .milliseconds(1500))
        #expect(reading < later)
        #expect(MonotonicTime.now >= reading)
    }
}
