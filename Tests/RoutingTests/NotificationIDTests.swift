import Crypto
import Foundation
import Testing

@testable import APNSCore

@Suite struct NotificationIDTests {
    @Test func sameCoordinatesGiveTheSameID() {
        let first = NotificationID.make(topic: "orders", partition: 1, offset: 99, route: "r", tokenIndex: 2)
        let second = NotificationID.make(topic: "orders", partition: 1, offset: 99, route: "r", tokenIndex: 2)
        #expect(first == second)
    }

    @Test func eachCoordinateChangesTheID() {
        let base = NotificationID.make(topic: "orders", partition: 1, offset: 99, route: "r", tokenIndex: 2)
        #expect(base != NotificationID.make(topic: "orders2", partition: 1, offset: 99, route: "r", tokenIndex: 2))
        #expect(base != NotificationID.make(topic: "orders", partition: 2, offset: 99, route: "r", tokenIndex: 2))
        #expect(base != NotificationID.make(topic: "orders", partition: 1, offset: 98, route: "r", tokenIndex: 2))
        #expect(base != NotificationID.make(topic: "orders", partition: 1, offset: 99, route: "s", tokenIndex: 2))
        #expect(base != NotificationID.make(topic: "orders", partition: 1, offset: 99, route: "r", tokenIndex: 3))
    }

    @Test func idsAreVersion5RFCVariantUUIDsSentInLowercase() {
        let id = NotificationID.make(topic: "orders", partition: 0, offset: 0, route: "r", tokenIndex: 0)
        let text = id.uuidString.lowercased()
        #expect(Array(text)[14] == "5")
        #expect("89ab".contains(Array(text)[19]))
        let notification = Notification(deviceToken: "t", topic: "x", pushType: .alert, id: id, payload: [])
        #expect(notification.apnsID == text)
    }

    @Test func idIsTheRFC9562Version5UUIDOfTheCoordinates() {
        // Pinned, and computed independently with Python:
        // `uuid.uuid5(namespace, "orders.shipped/3/1234/order-shipped/0")`.
        // Changing the derivation would break de-duplication of events processed again after an upgrade.
        let id = NotificationID.make(
            topic: "orders.shipped", partition: 3, offset: 1234, route: "order-shipped", tokenIndex: 0)
        #expect(id.uuidString.lowercased() == Self.pinned)
    }

    static let pinned = "e3502f16-6a40-5c51-914f-cb5526e0a072"
}

/// The hand-written SHA-1 behind ``NotificationID`` against swift-crypto's, across block boundaries.
@Suite struct SHA1Tests {
    @Test func digestsEqualSwiftCryptosForEveryLengthUpTo200Bytes() {
        var generator = SystemRandomNumberGenerator()
        for length in 0...200 {
            let message = (0..<length).map { _ in UInt8.random(in: 0...255, using: &generator) }
            let ours = message.withUnsafeBytes(SHA1.digest)
            let theirs = Array(Insecure.SHA1.hash(data: message))
            #expect(ours == theirs, "length \(length)")
        }
    }

    @Test("the SHA extensions' path and the portable one give the same words for every length up to 300 bytes")
    func hardwareAndPortablePathsAgree() {
        var generator = SystemRandomNumberGenerator()
        for length in 0...300 {
            for _ in 0..<4 {
                let message = (0..<length).map { _ in UInt8.random(in: 0...255, using: &generator) }
                let hardware = message.withUnsafeBytes { SHA1.digestWords($0) }
                let portable = message.withUnsafeBytes { SHA1.digestWords($0, hardware: false) }
                #expect(hardware == portable, "length \(length)")
            }
        }
    }

    @Test("this machine takes the SHA extensions' path when its CPU has them")
    func hardwarePathIsTakenWhereAvailable() throws {
        let cpuinfo = (try? String(contentsOfFile: "/proc/cpuinfo", encoding: .utf8)) ?? ""
        let flags = cpuinfo.split(separator: "\n").first { $0.hasPrefix("flags") } ?? ""
        let words = Set(flags.split(separator: " "))
        let hasExtensions = words.contains("sha_ni") && words.contains("sse4_1") && words.contains("ssse3")
        #expect(SHA1.hardwareAvailable == hasExtensions)
    }

    @Test func digestOfABCIsTheFIPSExample() {
        let digest = Array("abc".utf8).withUnsafeBytes(SHA1.digest)
        #expect(digest.map { String(format: "%02x", $0) }.joined() == "a9993e364706816aba3e25717850c26c9cd0d89d")
    }
}
