import APNSCore
import BinaryProvider
import Testing

@Suite("Binary write window")
struct BinaryWriteWindowTests {
    let start = ContinuousClock.now

    /// A window with `count` notifications written (items 0..<count), one millisecond apart.
    func window(
        writing count: Int, capacity: Int = 100, firstIdentifier: UInt32 = 1, maxResends: Int = 2
    ) -> BinaryWriteWindow<Int> {
        var window = BinaryWriteWindow<Int>(
            capacity: capacity, quietWindow: .seconds(1), maxResendsWithoutError: maxResends,
            firstIdentifier: firstIdentifier)
        for item in 0..<count {
            let identifier = window.write(item)
            window.written(through: identifier, at: self.start + .milliseconds(item))
        }
        return window
    }

    @Test("identifiers are consecutive per connection")
    func identifiers() {
        var window = BinaryWriteWindow<Int>(capacity: 10, quietWindow: .seconds(1), maxResendsWithoutError: 2)
        #expect(window.write(0) == 1)
        #expect(window.write(1) == 2)
        #expect(window.unconfirmed.map(\.identifier) == [1, 2])
    }

    @Test("a notification is delivered once written for the quiet window with the connection open")
    func quietWindow() {
        var window = self.window(writing: 3)
        #expect(window.confirmDue(now: self.start + .milliseconds(999)).isEmpty)
        #expect(window.nextConfirmation == self.start + .seconds(1))
        #expect(window.confirmDue(now: self.start + .milliseconds(1001)) == [0, 1])
        #expect(window.count == 1)
    }

    @Test("bytes not yet written are never confirmed; their quiet window starts when the connection wrote them")
    func confirmedOnlyWhenWritten() {
        var window = BinaryWriteWindow<Int>(capacity: 10, quietWindow: .seconds(1), maxResendsWithoutError: 2)
        for item in 0..<4 { _ = window.write(item) }
        // A gateway that stopped reading: nothing left the process, so nothing is due however long it waits.
        #expect(window.nextConfirmation == nil)
        #expect(window.confirmDue(now: self.start + .seconds(3600)).isEmpty)
        // The first two were written at +10 s (writes complete in order: marking 2 marks 1 too).
        window.written(through: 2, at: self.start + .seconds(10))
        #expect(window.nextConfirmation == self.start + .seconds(11))
        #expect(window.confirmDue(now: self.start + .seconds(3600)) == [0, 1])
        #expect(window.nextConfirmation == nil)
        // Identifiers outside the window mark nothing; a later mark does not move an earlier one.
        window.written(through: 99, at: self.start)
        window.written(through: 1, at: self.start)
        #expect(window.nextConfirmation == nil)
        window.written(through: 4, at: self.start + .seconds(20))
        window.written(through: 3, at: self.start + .seconds(30))
        #expect(window.confirmDue(now: self.start + .seconds(21)) == [2, 3])
    }

    @Test(
        "an error packet: those before the named one are delivered, it fails, those after are sent again",
        arguments: [0, 4, 9])
    func errorPacket(failing index: Int) {
        var window = self.window(writing: 10)
        let settlement = window.errorReceived(
            BinaryErrorResponse(status: .invalidToken, identifier: UInt32(index + 1)))
        #expect(settlement.delivered == Array(0..<index))
        #expect(settlement.failed?.item == index)
        #expect(settlement.failed?.verdict == .refused(.badDeviceToken))
        #expect(settlement.resend.map(\.item) == Array(index + 1..<10))
        #expect(settlement.resend.allSatisfy { $0.resendsWithoutError == 0 }, "a discarded notification is no attempt")
        #expect(settlement.lost.isEmpty)
        #expect(window.count == 0)
    }

    @Test("a shutdown names the last notification processed: it and those before are delivered")
    func shutdown() {
        var window = self.window(writing: 5)
        let settlement = window.errorReceived(BinaryErrorResponse(status: .shutdown, identifier: 3))
        #expect(settlement.delivered == [0, 1, 2])
        #expect(settlement.failed == nil)
        #expect(settlement.resend.map(\.item) == [3, 4])
    }

    @Test("an error naming a notification already confirmed, or never written, pins nothing: all are in doubt")
    func unknownIdentifier() {
        for identifier: UInt32 in [1, 99, 0] {
            var window = self.window(writing: 3, maxResends: 1)
            _ = window.confirmDue(now: self.start + .milliseconds(1000))  // confirms item 0 (identifier 1)
            let settlement = window.errorReceived(BinaryErrorResponse(status: .invalidToken, identifier: identifier))
            #expect(settlement.failed == nil)
            #expect(settlement.delivered.isEmpty)
            #expect(settlement.resend.map(\.item) == [1, 2])
            #expect(settlement.resend.map(\.resendsWithoutError) == [1, 1], "counted like a close without a packet")
            // The same again on the next connection: in doubt too often, so lost rather than resent forever.
            var next = BinaryWriteWindow<Int>(capacity: 10, quietWindow: .seconds(1), maxResendsWithoutError: 1)
            for resend in settlement.resend {
                _ = next.write(resend.item, resendsWithoutError: resend.resendsWithoutError)
            }
            let again = next.errorReceived(BinaryErrorResponse(status: .invalidToken, identifier: 99))
            #expect(again.lost == [1, 2])
            #expect(again.resend.isEmpty)
        }
    }

    @Test("identifiers wrap past 2^32 - 1 and are still found")
    func wrapping() {
        var window = self.window(writing: 4, firstIdentifier: .max - 1)
        #expect(window.unconfirmed.map(\.identifier) == [.max - 1, .max, 0, 1])
        let settlement = window.errorReceived(BinaryErrorResponse(status: .invalidPayloadSize, identifier: 0))
        #expect(settlement.delivered == [0, 1])
        #expect(settlement.failed?.item == 2)
        #expect(settlement.failed?.verdict == .refused(.payloadTooLarge))
        #expect(settlement.resend.map(\.item) == [3])
    }

    @Test("a close without an error packet sends everything again, until a notification was in doubt too often")
    func closedWithoutError() {
        var window = self.window(writing: 2, maxResends: 1)
        let first = window.closedWithoutError()
        #expect(first.resend.map(\.item) == [0, 1])
        #expect(first.resend.map(\.resendsWithoutError) == [1, 1])
        var next = BinaryWriteWindow<Int>(capacity: 10, quietWindow: .seconds(1), maxResendsWithoutError: 1)
        for resend in first.resend {
            _ = next.write(resend.item, resendsWithoutError: resend.resendsWithoutError)
        }
        let second = next.closedWithoutError()
        #expect(second.resend.isEmpty)
        #expect(second.lost == [0, 1])
    }

    @Test("the window is full at its capacity: the writer waits")
    func capacity() {
        var window = self.window(writing: 3, capacity: 3)
        #expect(window.isFull)
        _ = window.confirmDue(now: self.start + .seconds(1))
        #expect(!window.isFull)
    }
}
