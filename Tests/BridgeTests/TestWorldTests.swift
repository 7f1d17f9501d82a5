import Foundation
import TestSupport
import Testing

/// The tests' one world (`TestSupport`'s ``TestWorld``): opened for a body, closed however the body ends.
@Suite("The test world")
struct TestWorldTests {
    struct Thrown: Error {}

    static let configuration = TestWorld.Configuration(
        topics: [("events", 2)], keyID: "WORLDKEY01", teamID: "WORLDTEAM1")

    @Test("withTestWorld returns the body's value and closes the world: its directory is gone")
    func closesAfterTheBody() async throws {
        let (directory, keyWritten) = try await withTestWorld(Self.configuration) { world in
            (world.directory, FileManager.default.fileExists(atPath: world.path("AuthKey.p8")))
        }
        #expect(keyWritten, "the provider key the simulator trusts is in the directory")
        #expect(!FileManager.default.fileExists(atPath: directory.path))
    }

    @Test("withTestWorld closes the world when the body throws, and rethrows")
    func closesWhenTheBodyThrows() async throws {
        var directory: URL?
        do {
            try await withTestWorld(Self.configuration) { world in
                directory = world.directory
                throw Thrown()
            }
            Issue.record("the body's error was not rethrown")
        } catch is Thrown {}
        let opened = try #require(directory)
        #expect(!FileManager.default.fileExists(atPath: opened.path))
    }
}
