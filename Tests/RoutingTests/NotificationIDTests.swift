import APNSCore
import Foundation
import Testing

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
