import APNSCore
import Testing

@testable import BridgeCore

// The per-key lines of routes with `ordering_key`, as plain values: arrivals, final outcomes and hand-overs in
// every order the pipeline's threads can produce them.

@Suite("Ordering state machine")
struct OrderingStateMachineTests {
    typealias Machine = OrderingStateMachine<String, Int>

    @Test("the first item of a key is sent at once; later ones wait")
    func firstSendsLaterWait() {
        var machine = Machine()
        guard case .send = machine.arrive(1, key: "a", coalesce: false) else {
            Issue.record("the first item of a key must go out")
            return
        }
        guard case .wait(let replaced) = machine.arrive(2, key: "a", coalesce: false) else {
            Issue.record("a second item of a busy key must wait")
            return
        }
        #expect(replaced.isEmpty)
        #expect(machine.waitingCount == 1)
    }

    @Test("removing waiting items takes them from every line, keeps items in flight and the others' order")
    func removeWaitingItems() {
        var machine = Machine()
        for item in 1...6 { _ = machine.arrive(item, key: "a", coalesce: false) }
        for item in 10...12 { _ = machine.arrive(item, key: "b", coalesce: false) }
        _ = machine.arrive(20, key: "c", coalesce: false)
        #expect(machine.deepestWaiting == 5)
        // 1, 10 and 20 are in flight; the even items and 11 are removed.
        let removed = machine.removeWaiting { $0 % 2 == 0 || $0 == 11 }
        #expect(removed.sorted() == [2, 4, 6, 11, 12])
        #expect(machine.waitingCount == 2)
        #expect(machine.deepestWaiting == 2)
        // The lines go on with what is left, in order; the item in flight of a line is never removed.
        var order: [Int?] = []
        for _ in 0..<3 {
            order.append(machine.finished(key: "a"))
            _ = machine.handedOver(key: "a")
        }
        #expect(order == [3, 5, nil])
        let nextOfB = machine.finished(key: "b")
        #expect(nextOfB == nil, "b had only its item in flight left")
        #expect(machine.lines.keys.sorted() == ["c"])
        let none = machine.removeWaiting { _ in true }
        #expect(none == [])
    }

    @Test("different keys do not wait for each other")
    func keysAreIndependent() {
        var machine = Machine()
        for key in ["a", "b", "c"] {
            guard case .send = machine.arrive(1, key: key, coalesce: false) else {
                Issue.record("key \(key) waited for another key")
                return
            }
        }
        #expect(machine.lines.count == 3)
        #expect(machine.waitingCount == 0)
    }

    @Test("a line hands its items over one at a time, in arrival order")
    func fifoOneAtATime() {
        var machine = Machine()
        _ = machine.arrive(0, key: "a", coalesce: false)
        for item in 1..<5 { _ = machine.arrive(item, key: "a", coalesce: false) }
        var sent: [Int] = [0]
        while let next = machine.finished(key: "a") {
            sent.append(next)
            // While the item is being handed over, nothing else of the line comes out.
            #expect(machine.handedOver(key: "a") == nil)
        }
        #expect(sent == [0, 1, 2, 3, 4])
        #expect(machine.lines.isEmpty, "an empty line must be removed: memory follows what is in flight")
        #expect(machine.waitingCount == 0)
    }

    @Test("an outcome during the hand-over moves the line when the hand-over ends, not from inside it")
    func outcomeDuringHandOver() {
        var machine = Machine()
        _ = machine.arrive(0, key: "a", coalesce: false)
        _ = machine.arrive(1, key: "a", coalesce: false)
        _ = machine.arrive(2, key: "a", coalesce: false)
        #expect(machine.finished(key: "a") == 1)
        // Item 1's answer comes before its send call returned (or it expired in its turn).
        #expect(machine.finished(key: "a") == nil)
        #expect(machine.handedOver(key: "a") == 2)
        #expect(machine.handedOver(key: "a") == nil)
        #expect(machine.finished(key: "a") == nil)
        #expect(machine.lines.isEmpty)
    }

    @Test("a line emptied during a hand-over is removed when the hand-over ends")
    func emptiedDuringHandOver() {
        var machine = Machine()
        _ = machine.arrive(0, key: "a", coalesce: false)
        _ = machine.arrive(1, key: "a", coalesce: false)
        #expect(machine.finished(key: "a") == 1)
        #expect(machine.finished(key: "a") == nil)
        #expect(machine.lines["a"]?.phase == .finishedWhileHandingOver)
        #expect(machine.handedOver(key: "a") == nil)
        #expect(machine.lines.isEmpty)
    }

    @Test("an item arriving during a hand-over waits behind it")
    func arrivalDuringHandOver() {
        var machine = Machine()
        _ = machine.arrive(0, key: "a", coalesce: false)
        _ = machine.arrive(1, key: "a", coalesce: false)
        #expect(machine.finished(key: "a") == 1)
        guard case .wait = machine.arrive(2, key: "a", coalesce: false) else {
            Issue.record("an item went out while its line's item was being handed over")
            return
        }
        #expect(machine.handedOver(key: "a") == nil)
        #expect(machine.finished(key: "a") == 2)
    }

    @Test("a second outcome for the same item does not move the line twice")
    func doubleFinishIsIgnored() {
        var machine = Machine()
        _ = machine.arrive(0, key: "a", coalesce: false)
        _ = machine.arrive(1, key: "a", coalesce: false)
        _ = machine.arrive(2, key: "a", coalesce: false)
        #expect(machine.finished(key: "a") == 1)
        #expect(machine.finished(key: "a") == nil)
        #expect(machine.finished(key: "a") == nil)
        #expect(machine.handedOver(key: "a") == 2)
    }

    @Test("finishing or handing over a key without a line does nothing")
    func unknownKey() {
        var machine = Machine()
        #expect(machine.finished(key: "x") == nil)
        #expect(machine.handedOver(key: "x") == nil)
        #expect(machine.lines.isEmpty)
    }

    @Test("with coalesce, a newer item replaces the waiting one; the item in flight stays")
    func coalesceReplacesWaiting() {
        var machine = Machine()
        _ = machine.arrive(0, key: "a", coalesce: true)
        guard case .wait(let none) = machine.arrive(1, key: "a", coalesce: true) else {
            Issue.record("expected a wait")
            return
        }
        #expect(none.isEmpty, "nothing waited yet, so nothing is replaced")
        for newer in 2..<10 {
            guard case .wait(let replaced) = machine.arrive(newer, key: "a", coalesce: true) else {
                Issue.record("expected a wait")
                return
            }
            #expect(replaced == [newer - 1])
            #expect(machine.waitingCount == 1, "with coalesce at most one item waits per key")
        }
        #expect(machine.finished(key: "a") == 9, "the newest is sent next")
        #expect(machine.handedOver(key: "a") == nil)
        #expect(machine.finished(key: "a") == nil)
        #expect(machine.lines.isEmpty)
    }

    @Test("coalescing in one line leaves other lines alone")
    func coalescePerKey() {
        var machine = Machine()
        _ = machine.arrive(0, key: "a", coalesce: true)
        _ = machine.arrive(1, key: "a", coalesce: true)
        _ = machine.arrive(10, key: "b", coalesce: true)
        guard case .wait(let replaced) = machine.arrive(11, key: "b", coalesce: true) else {
            Issue.record("expected a wait")
            return
        }
        #expect(replaced.isEmpty)
        #expect(machine.waitingCount == 2)
        #expect(machine.finished(key: "a") == 1)
        #expect(machine.finished(key: "b") == 11)
    }

    @Test(
        "random interleavings over several keys: one in flight per key, input order, nothing lost or repeated",
        arguments: [1, 2, 3, 42, 1234] as [UInt64])
    func randomInterleavings(seed: UInt64) {
        for coalesce in [false, true] {
            var random = SplitMix64(seed: seed)
            var machine = Machine()
            let keys = ["a", "b", "c", "d"]
            var nextItem = 0
            var arrivedOrder: [String: [Int]] = [:]
            var sentOrder: [String: [Int]] = [:]
            var replacedItems: Set<Int> = []
            // Per key: the item in flight, and whether its hand-over is still going on.
            var inFlight: [String: (item: Int, handingOver: Bool, finished: Bool)] = [:]
            var steps = 0
            while steps < 2_000 || !inFlight.isEmpty {
                steps += 1
                let key = keys[Int(random.next() % UInt64(keys.count))]
                let choice = random.next() % 3
                if choice == 0 && steps < 2_000 {
                    let item = nextItem
                    nextItem += 1
                    arrivedOrder[key, default: []].append(item)
                    switch machine.arrive(item, key: key, coalesce: coalesce) {
                    case .send:
                        #expect(inFlight[key] == nil, "a second item of \(key) went out")
                        inFlight[key] = (item, false, false)
                        sentOrder[key, default: []].append(item)
                    case .wait(let replaced):
                        #expect(inFlight[key] != nil, "an item waited behind an idle line")
                        if !coalesce { #expect(replaced.isEmpty) }
                        replacedItems.formUnion(replaced)
                    }
                } else if let current = inFlight[key], !current.finished, choice == 1 || steps >= 2_000 {
                    let next = machine.finished(key: key)
                    if current.handingOver {
                        #expect(next == nil, "the line moved from inside a hand-over")
                        inFlight[key]?.finished = true
                    } else if let next {
                        inFlight[key] = (next, true, false)
                        sentOrder[key, default: []].append(next)
                    } else {
                        inFlight[key] = nil
                    }
                } else if let current = inFlight[key], current.handingOver {
                    let next = machine.handedOver(key: key)
                    if current.finished {
                        if let next {
                            inFlight[key] = (next, true, false)
                            sentOrder[key, default: []].append(next)
                        } else {
                            inFlight[key] = nil
                        }
                    } else {
                        #expect(next == nil)
                        inFlight[key]?.handingOver = false
                    }
                }
            }
            #expect(machine.lines.isEmpty)
            #expect(machine.waitingCount == 0)
            for key in keys {
                let expected = (arrivedOrder[key] ?? []).filter { !replacedItems.contains($0) }
                #expect(sentOrder[key] ?? [] == expected, "key \(key), coalesce \(coalesce)")
            }
            // Every item was sent or replaced, exactly once.
            let sentCount = sentOrder.values.reduce(0) { $0 + $1.count }
            #expect(sentCount + replacedItems.count == nextItem)
            if coalesce { #expect(!replacedItems.isEmpty, "the interleaving never coalesced: the test proves nothing") }
        }
    }
}
