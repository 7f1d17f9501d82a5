import APNSCore
import Testing

@testable import BridgeCore

@Suite("Partition progress")
struct PartitionProgressTests {
    @Test("nothing is committable until the oldest event finishes")
    func waitsForOldest() {
        var progress = PartitionProgress()
        for offset in Int64(10)...12 { progress.begin(offset: offset) }
        let finishedMiddle = progress.finish(offset: 11)
        let finishedLast = progress.finish(offset: 12)
        #expect(!finishedMiddle && !finishedLast)
        #expect(progress.commitOffset == nil)
        let finishedOldest = progress.finish(offset: 10)
        #expect(finishedOldest)
        #expect(progress.commitOffset == 13)
        #expect(progress.unfinishedCount == 0)
    }

    @Test("an event with a dropped piece never finishes: the commit stops before it, and a drain does not await it")
    func abandonedPiece() {
        var progress = PartitionProgress()
        progress.begin(offset: 0, pieces: 1)
        progress.begin(offset: 1, pieces: 2)
        progress.begin(offset: 2, pieces: 1)
        let found = progress.abandonPiece(offset: 1)
        #expect(found)
        #expect(progress.awaitedCount == 2)
        progress.finishPiece(offset: 0)
        progress.finishPiece(offset: 1)  // its other piece: the event still does not finish
        progress.finishPiece(offset: 2)
        #expect(progress.commitOffset == 1)
        #expect(progress.unfinishedCount == 1)
        #expect(progress.awaitedCount == 0)
        // Dropping a second piece of the same event counts it once; an unknown offset is refused.
        let again = progress.abandonPiece(offset: 1)
        let unknown = progress.abandonPiece(offset: 7)
        #expect(again && !unknown)
        #expect(progress.awaitedCount == 0)
    }

    @Test("the commit offset stops at the first unfinished event")
    func stopsAtGap() {
        var progress = PartitionProgress()
        for offset in Int64(0)..<5 { progress.begin(offset: offset) }
        progress.finish(offset: 0)
        progress.finish(offset: 1)
        progress.finish(offset: 3)
        #expect(progress.commitOffset == 2)
        #expect(progress.unfinishedCount == 2)
    }

    @Test("a broker's extreme offsets neither overflow nor get lost: the last Int64 commits as itself")
    func extremeOffsets() {
        var top = PartitionProgress()
        top.begin(offset: .max - 1)
        top.begin(offset: .max)
        let finishedBelowTop = top.finish(offset: .max - 1)
        #expect(finishedBelowTop)
        #expect(top.commitOffset == .max)
        let finishedTop = top.finish(offset: .max)
        #expect(finishedTop)
        #expect(top.commitOffset == .max)
        #expect(top.unfinishedCount == 0)

        // The two ends of Int64 in one partition: their distance overflows, so the entry is found by search.
        var span = PartitionProgress()
        span.begin(offset: .min)
        span.begin(offset: .max)
        let finishedLast = span.finish(offset: .max)
        #expect(!finishedLast)
        #expect(span.unfinishedCount == 1)
        let finishedFirst = span.finish(offset: .min)
        #expect(finishedFirst)
        #expect(span.commitOffset == .max)
        #expect(span.unfinishedCount == 0)
    }

    @Test("offsets with gaps (compaction, transaction markers) are tracked")
    func gaps() {
        var progress = PartitionProgress()
        for offset: Int64 in [3, 7, 100] { progress.begin(offset: offset) }
        progress.finish(offset: 7)
        progress.finish(offset: 3)
        #expect(progress.commitOffset == 8)
        progress.finish(offset: 100)
        #expect(progress.commitOffset == 101)
    }

    @Test("finishing an unknown or already finished offset changes nothing")
    func ignoresStrays() {
        var progress = PartitionProgress()
        progress.begin(offset: 5)
        let unknown = progress.finish(offset: 4)
        let first = progress.finish(offset: 5)
        let second = progress.finish(offset: 5)
        #expect(!unknown && first && !second)
        #expect(progress.commitOffset == 6)
        #expect(progress.unfinishedCount == 0)
    }

    @Test("an event of several pieces finishes with its last piece; strays after that change nothing")
    func pieces() {
        var progress = PartitionProgress()
        progress.begin(offset: 20, pieces: 3)
        progress.begin(offset: 21, pieces: 1)
        let twentyOne = progress.finishPiece(offset: 21)
        let first = progress.finishPiece(offset: 20)
        let second = progress.finishPiece(offset: 20)
        #expect(!twentyOne && !first && !second)
        #expect(progress.commitOffset == nil)
        #expect(progress.unfinishedCount == 1)
        let last = progress.finishPiece(offset: 20)
        #expect(last)
        #expect(progress.commitOffset == 22)
        let stray = progress.finishPiece(offset: 20)
        let unknown = progress.finishPiece(offset: 19)
        #expect(!stray && !unknown)
        #expect(progress.unfinishedCount == 0)
    }

    @Test("random finishing orders always commit exactly past the finished prefix")
    func randomOrders() {
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<200 {
            var progress = PartitionProgress()
            let count = Int.random(in: 1...60, using: &generator)
            for offset in 0..<count { progress.begin(offset: Int64(offset)) }
            var finished = Set<Int64>()
            for offset in (0..<count).map(Int64.init).shuffled(using: &generator) {
                progress.finish(offset: offset)
                finished.insert(offset)
                var prefix: Int64 = 0
                while finished.contains(prefix) { prefix += 1 }
                #expect(progress.commitOffset == (prefix == 0 ? nil : prefix))
            }
        }
    }

    @Test("random gaps and finishing orders: the commit offset is one past the finished prefix, strays change nothing")
    func randomGapsAndStrays() {
        var generator = SplitMix64(seed: 0x5EED_0FF5)
        for _ in 0..<300 {
            var progress = PartitionProgress()
            // Runs of contiguous offsets (the guess by distance finds them) broken by gaps (binary search).
            var offsets: [Int64] = []
            var next = Int64.random(in: 0...1000, using: &generator)
            for _ in 0..<Int.random(in: 1...80, using: &generator) {
                offsets.append(next)
                next += Bool.random(using: &generator) ? 1 : Int64.random(in: 2...40, using: &generator)
            }
            for offset in offsets { progress.begin(offset: offset) }
            var finished = Set<Int64>()
            for offset in offsets.shuffled(using: &generator) {
                // An offset never begun (in a gap, before the first or after the last) is ignored.
                let stray = offset + 1
                if !offsets.contains(stray) {
                    let before = progress.commitOffset
                    let moved = progress.finish(offset: stray)
                    #expect(!moved)
                    #expect(progress.commitOffset == before)
                }
                progress.finish(offset: offset)
                finished.insert(offset)
                let prefix = offsets.prefix { finished.contains($0) }
                #expect(progress.commitOffset == prefix.last.map { $0 + 1 })
                #expect(progress.unfinishedCount == offsets.count - finished.count)
            }
        }
    }
}

@Suite("Backoff")
struct BackoffTests {
    @Test("ceilings double from the initial wait up to the maximum")
    func ceilings() {
        let backoff = Backoff(initial: .seconds(1), maximum: .seconds(10))
        #expect(backoff.ceiling(afterAttempt: 1) == .seconds(1))
        #expect(backoff.ceiling(afterAttempt: 2) == .seconds(2))
        #expect(backoff.ceiling(afterAttempt: 4) == .seconds(8))
        #expect(backoff.ceiling(afterAttempt: 5) == .seconds(10))
        #expect(backoff.ceiling(afterAttempt: 1000) == .seconds(10))
    }

    @Test("jittered delays stay within the ceiling")
    func jitter() {
        let backoff = Backoff(initial: .milliseconds(100), maximum: .seconds(5))
        for attempt in 1...20 {
            let delay = backoff.delay(afterAttempt: attempt)
            #expect(delay >= .zero)
            #expect(delay <= backoff.ceiling(afterAttempt: attempt))
        }
    }
}
