import BenchSupport
import Testing

/// `make bench` measures the bridge's CPU over a span placed by when notifications were completed, not by when the
/// bench read their outcomes (docs/benchmarks.md, "What holds the window, and a measure that counts all the work").
struct SteadySpanTests {
    @Test func theSpanRunsFromATenthInToATenthBeforeTheEndAndAtLeastAWindowIn() {
        let span = SteadySpan(eventCount: 200_000, maxInFlight: 10_000)
        #expect(span.isSteady)
        #expect(span.start == 20_000)
        #expect(span.end == 180_000)
        let wide = SteadySpan(eventCount: 200_000, maxInFlight: 40_000)
        #expect(wide.start == 40_000)
        #expect(wide.end == 120_000)
        #expect(wide.caveat.isEmpty)
    }

    @Test func aBacklogOfFewerThanFiveWindowsRunsFromTheFirstCompletionWithACaveat() {
        let span = SteadySpan(eventCount: 20_000, maxInFlight: 10_000)
        #expect(!span.isSteady)
        #expect(span.start == 0)
        #expect(span.end == 19_999)
        #expect(span.caveat.contains("at least 5 × 10000"))
    }

    /// Completions at 1 000 a second, one per millisecond from t = 0; CPU readings every 20 ms at 1 ms of CPU per
    /// notification. However late the outcomes were read, the span counts the notifications completed between the
    /// two readings it uses, and so the CPU per notification comes out at 1 ms.
    @Test func theSpanCountsTheNotificationsCompletedBetweenItsReadingsWhateverTheirOrder() throws {
        let span = SteadySpan(eventCount: 1000, maxInFlight: 100)
        // Read out of order, as several partitions' outcomes are.
        let completions = (0..<1000).map { Int64($0) }.reversed().map { $0 }
        let trace = stride(from: 0, through: 1000, by: 20).map {
            SteadySpan.Sample(epochMilliseconds: Int64($0), cpu: Double($0) / 1000, serverCPU: Double($0) / 2000)
        }
        let measured = try #require(span.measure(trace: trace, completions: completions))
        // The 10th-percentile completion is at 100 ms, and the end at 800 ms (1000 − max(100, 200)).
        #expect(measured.start.epochMilliseconds == 100)
        #expect(measured.end.epochMilliseconds == 800)
        #expect(measured.completed == 700)
        #expect(abs(measured.cpu / Double(measured.completed) - 0.001) < 1e-12)
        #expect(abs(measured.seconds - 0.7) < 1e-12)
        #expect(abs(measured.serverCPU - 0.35) < 1e-12)
    }

    @Test func noTwoReadingsInsideTheSpanMeasureNothing() {
        let span = SteadySpan(eventCount: 1000, maxInFlight: 100)
        let completions = (0..<1000).map { Int64($0) }
        let trace = [SteadySpan.Sample(epochMilliseconds: 500, cpu: 1, serverCPU: 0)]
        #expect(span.measure(trace: trace, completions: completions) == nil)
        #expect(span.measure(trace: [], completions: []) == nil)
    }
}
