// What a retain and a release cost on an object one thread uses against one two threads use at once
// (docs/benchmarks.md, "Objects every notification retains"). Two threads each run ITERATIONS rounds of about
// 100 ns of private work followed by N retain/release pairs, on an object of their own or on one they share.
//
//   swiftc -O scripts/bench/shared-count-cost.swift -o /tmp/shared-count-cost && /tmp/shared-count-cost
import Foundation

final class Counted: @unchecked Sendable { var value = 0 }

/// Each thread's result, written by that thread only.
final class Results: @unchecked Sendable {
    let values: UnsafeMutableBufferPointer<Double>
    init(_ count: Int) { self.values = .allocate(capacity: count) }
    deinit { self.values.deallocate() }
}

@inline(never) func read(_ object: Counted) -> Int { object.value }

/// Nanoseconds per round, averaged over the threads.
func run(threads: Int, shared: Bool, pairs: Int, iterations: Int) -> Double {
    let common = Counted()
    let results = Results(threads)
    let group = DispatchGroup()
    for thread in 0..<threads {
        group.enter()
        Thread.detachNewThread {
            let object = shared ? common : Counted()
            var scratch = [Int](repeating: 1, count: 64)
            var sum = 0
            let start = DispatchTime.now().uptimeNanoseconds
            for round in 0..<iterations {
                for _ in 0..<8 { for index in 0..<64 { scratch[index] = scratch[index] &* 31 &+ round } }
                for _ in 0..<pairs {
                    let reference = Unmanaged.passUnretained(object).retain()
                    sum &+= read(reference.takeUnretainedValue())
                    reference.release()
                }
            }
            results.values[thread] = Double(DispatchTime.now().uptimeNanoseconds - start) / Double(iterations)
            if sum == 42 { print(scratch[0]) }
            group.leave()
        }
    }
    group.wait()
    return results.values.reduce(0, +) / Double(threads)
}

let iterations = 500_000
for pairs in [0, 1, 4] {
    for (threads, shared) in [(1, false), (2, false), (2, true)] {
        let nanoseconds = run(threads: threads, shared: shared, pairs: pairs, iterations: iterations)
        print(
            "threads \(threads), \(shared ? "one shared object" : "an object each"), \(pairs) pairs a round: "
                + String(format: "%.1f ns a round", nanoseconds))
    }
}
