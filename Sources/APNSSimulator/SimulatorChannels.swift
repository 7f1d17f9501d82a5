import APNSCore
import Foundation

/// The broadcast channels the simulator knows, per app (bundle ID), in creation order: what Apple's channel
/// management API creates, reads, lists and deletes (Apple: *Sending channel management requests to APNs*).
/// A plain value: the engine keeps it under its lock.
struct SimulatorChannels {
    /// The channels of one app.
    private struct App {
        var order: [String] = []
        var storagePolicies: [String: Int] = [:]

        mutating func insert(_ channelID: String, policy: Int) {
            if self.storagePolicies.updateValue(policy, forKey: channelID) == nil { self.order.append(channelID) }
        }
    }

    /// Channels an app may hold at once (Apple: 10 000 per app and environment).
    let limitPerApp: Int
    /// Channels all apps together may hold at once: without `topics` the simulator takes any bundle ID, and the
    /// per-app limit alone would not bound the store (Apple documents no such limit; it is the simulator's).
    let limitTotal: Int
    private var apps: [String: App] = [:]
    /// Channels held by every app together.
    private(set) var count = 0
    /// Apps holding at least one channel.
    var appCount: Int { self.apps.count }

    init(limitPerApp: Int, limitTotal: Int, preset: [SimulatorScenario.Channel]) {
        self.limitPerApp = limitPerApp
        self.limitTotal = limitTotal
        for channel in preset {
            self.apps[channel.bundleID, default: App()].insert(channel.channelID, policy: channel.storagePolicy)
        }
        self.count = self.apps.values.reduce(0) { $0 + $1.order.count }
    }

    /// Adds `channelID` for `bundleID`; `false` when the app, or all apps together, are at their limit.
    mutating func create(_ channelID: String, bundleID: String, storagePolicy: Int) -> Bool {
        guard (self.apps[bundleID]?.order.count ?? 0) < self.limitPerApp, self.count < self.limitTotal else {
            return false
        }
        self.apps[bundleID, default: App()].insert(channelID, policy: storagePolicy)
        self.count += 1
        return true
    }

    /// The storage policy of a channel, `nil` when the app has no such channel.
    func storagePolicy(of channelID: String, bundleID: String) -> Int? {
        self.apps[bundleID]?.storagePolicies[channelID]
    }

    /// Removes a channel; `false` when the app has no such channel.
    mutating func delete(_ channelID: String, bundleID: String) -> Bool {
        guard self.apps[bundleID]?.storagePolicies.removeValue(forKey: channelID) != nil else { return false }
        self.apps[bundleID]?.order.removeAll { $0 == channelID }
        self.count -= 1
        // An app without channels is forgotten, so that creating and deleting under ever new bundle IDs leaves
        // nothing behind.
        if self.apps[bundleID]?.order.isEmpty == true { self.apps[bundleID] = nil }
        return true
    }

    /// The app's channel IDs in creation order.
    func list(bundleID: String) -> [String] {
        self.apps[bundleID]?.order ?? []
    }

    /// Whether `channelID` could be a channel ID at all: Apple's IDs are base64 (Apple: a malformed one is
    /// `BadChannelId`, a well-formed unknown one `ChannelNotRegistered`).
    static func isWellFormed(_ channelID: String) -> Bool {
        !channelID.isEmpty && channelID.utf8.count <= 256 && Data(base64Encoded: channelID) != nil
    }

    /// A new channel ID: 16 random bytes in base64, like Apple's (which are random and never reused).
    static func newID(_ generator: inout SplitMix64) -> String {
        var bytes = [UInt8](repeating: 0, count: 16)
        withUnsafeBytes(of: (generator.next(), generator.next())) { random in
            for index in bytes.indices { bytes[index] = random[index] }
        }
        return Data(bytes).base64EncodedString()
    }
}
