import Testing

@testable import APNSSimulator

/// The simulator's channel store as a plain value.
@Suite("Simulator channel store")
struct SimulatorChannelsTests {
    @Test("creating and deleting under ever new bundle IDs leaves nothing behind")
    func churnLeavesNothing() {
        var channels = SimulatorChannels(limitPerApp: 10, limitTotal: 10, preset: [])
        for app in 0..<1_000 {
            let bundleID = "com.example.app\(app)"
            let created = channels.create("AAAA", bundleID: bundleID, storagePolicy: 0)
            let deleted = channels.delete("AAAA", bundleID: bundleID)
            #expect(created && deleted)
        }
        #expect(channels.count == 0)
        #expect(channels.appCount == 0)
    }

    @Test("the total limit counts the channels of every app, preset ones included")
    func totalLimit() {
        var channels = SimulatorChannels(
            limitPerApp: 10, limitTotal: 3, preset: [.init(bundleID: "a.b", channelID: "AAAA", storagePolicy: 0)])
        let created = [("BBBB", "c.d"), ("CCCC", "e.f"), ("DDDD", "g.h")].map { channelID, bundleID in
            channels.create(channelID, bundleID: bundleID, storagePolicy: 0)
        }
        #expect(created == [true, true, false])
        #expect(channels.count == 3)
        #expect(channels.list(bundleID: "g.h").isEmpty)
    }
}
