import APNSCore
import Crypto
import Foundation
import Synchronization

/// A wall clock tests move by hand.
final class ManualClock: WallClock {
    private let current: Mutex<Date>

    init(_ start: Date = Date()) {
        self.current = Mutex(start)
    }

    func now() -> Date { self.current.withLock { $0 } }

    func advance(by duration: Duration) {
        let seconds = Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
        self.current.withLock { $0 = $0.addingTimeInterval(seconds) }
    }
}

enum Fixtures {
    static let keyID = "ABC123DEFG"
    static let teamID = "TEAM123456"
    static let topic = "com.example.app"

    /// A well-formed device token, different for each `index`.
    static func deviceToken(_ index: Int = 0) -> String {
        let hex = String(index, radix: 16)
        return String(repeating: "0", count: 64 - hex.count) + hex
    }

    static func notification(
        token: String = Fixtures.deviceToken(),
        pushType: PushType = .alert,
        priority: Priority? = nil,
        payload: String = #"{"aps":{"alert":"hi"}}"#
    ) -> APNSCore.Notification {
        Notification(
            deviceToken: token,
            topic: pushType.topic(for: Self.topic),
            pushType: pushType,
            priority: priority,
            id: UUID(),
            payload: Array(payload.utf8)
        )
    }

    /// A fresh temporary directory.
    static func temporaryDirectory() throws -> String {
        let path = (NSTemporaryDirectory() as NSString).appendingPathComponent("apns-tests-\(UUID().uuidString)")
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }

    /// Writes `key` as a `.p8` file and returns its path.
    static func writeP8(_ key: P256.Signing.PrivateKey, in directory: String) throws -> String {
        let path = (directory as NSString).appendingPathComponent("AuthKey_\(Self.keyID).p8")
        try Data(key.pemRepresentation.utf8).write(to: URL(fileURLWithPath: path))
        return path
    }
}
