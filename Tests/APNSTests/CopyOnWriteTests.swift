import APNSCore
import CopyOnWrite
import Foundation
import HTTP2
import Testing

/// `Notification` and `HTTP2Request` keep their parts in one shared object until a copy is changed (copy on write):
/// they must still behave as values.
struct CopyOnWriteTests {
    private static func notification() -> APNSCore.Notification {
        Notification(
            deviceToken: String(repeating: "ab", count: 32), topic: "com.example.shop", pushType: .alert,
            expirationEpochSeconds: 1_795_000_000, collapseID: "order-1", id: UUID(),
            payload: Array(#"{"aps":{"alert":"hi"}}"#.utf8))
    }

    @Test("changing a copy of a notification leaves the original as it was, field by field")
    func notificationCopiesAreIndependent() {
        let original = Self.notification()
        var copy = original
        #expect(copy == original)
        copy.deviceToken = "cd"
        copy.channelID = "channel"
        copy.topic = "com.example.other"
        copy.pushType = .background
        copy.priority = .powerSaving
        copy.expirationEpochSeconds = nil
        copy.collapseID = nil
        copy.payload = []
        copy.expedited = true
        let newID = UUID()
        copy.id = newID
        #expect(original.deviceToken == String(repeating: "ab", count: 32))
        #expect(original.channelID == nil)
        #expect(original.topic == "com.example.shop")
        #expect(original.pushType == .alert)
        #expect(original.priority == .immediate)
        #expect(original.expirationEpochSeconds == 1_795_000_000)
        #expect(original.collapseID == "order-1")
        #expect(original.payload == Array(#"{"aps":{"alert":"hi"}}"#.utf8))
        #expect(!original.expedited)
        #expect(copy.id == newID)
        #expect(copy.apnsID == newID.uuidString.lowercased(), "apns-id follows a new id")
        #expect(original.apnsID == original.id.uuidString.lowercased())
        #expect(copy != original)
    }

    @Test("notifications with the same fields are equal and hash alike, whether or not they share storage")
    func notificationEqualityIsByValue() {
        let first = Self.notification()
        var second = APNSCore.Notification(
            deviceToken: first.deviceToken, topic: first.topic, pushType: first.pushType,
            expirationEpochSeconds: first.expirationEpochSeconds, collapseID: first.collapseID, id: first.id,
            payload: first.payload)
        #expect(first == second)
        #expect(first.hashValue == second.hashValue)
        #expect(Set([first, second]).count == 1)
        second.expedited = true
        #expect(first != second)
    }

    @Test("changing a copy of an HTTP/2 request leaves the original as it was")
    func requestCopiesAreIndependent() {
        let original = HTTP2Request(
            path: "/3/device/abc", headers: [HTTP2Header("apns-topic", "com.example.shop")], body: [1, 2, 3])
        var copy = original
        copy.method = "GET"
        copy.path = "/other"
        copy.pathIndexing = .incremental
        copy.authority = "example.com"
        copy.headers = []
        copy.body = []
        copy.expedited = true
        #expect(original.method == "POST")
        #expect(original.path == "/3/device/abc")
        #expect(original.pathIndexing == .never)
        #expect(original.authority == nil)
        #expect(original.headers.count == 1)
        #expect(original.body == [1, 2, 3])
        #expect(!original.expedited)
        #expect(copy.method == "GET" && copy.path == "/other" && copy.expedited)
    }

    @Test("a copy shares the value until one side changes it, and then only that side has the change")
    func boxSharesUntilChanged() {
        let original = CopyOnWrite([1, 2, 3])
        var copy = original
        #expect(copy.isSharing(with: original))
        copy.value.append(4)
        #expect(!copy.isSharing(with: original))
        #expect(original.value == [1, 2, 3])
        #expect(copy.value == [1, 2, 3, 4])
        var alone = CopyOnWrite([0])
        let before = alone
        alone.value[0] = 1
        #expect(before.value == [0] && alone.value == [1])
    }
}
