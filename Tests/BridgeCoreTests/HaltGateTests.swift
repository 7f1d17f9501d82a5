import BridgeCore
import PipelineTestSupport
import Synchronization
import Testing

@Suite("Halt gate")
struct HaltGateTests {
    @Test("an open gate lets senders through at once")
    func openGate() async throws {
        let gate = HaltGate()
        try await gate.waitUntilOpen()
        #expect(gate.current == nil)
    }

    @Test("senders wait while halted and all go on after resume")
    func waitsAndResumes() async throws {
        let changes = Mutex<[String?]>([])
        let gate = HaltGate { halt in changes.withLock { $0.append(halt?.reason) } }
        gate.halt(reason: "app default: InvalidProviderToken")
        gate.halt(reason: "a second reason is ignored")
        #expect(gate.current?.reason == "app default: InvalidProviderToken")
        let passed = Counter()
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<50 {
                group.addTask {
                    try await gate.waitUntilOpen()
                    passed.increment()
                }
            }
            try await Task.sleep(for: .milliseconds(50))
            #expect(passed.value == 0)
            gate.resume()
            try await group.waitForAll()
        }
        #expect(passed.value == 50)
        #expect(changes.withLock { $0 } == ["app default: InvalidProviderToken", nil])
    }

    @Test("a watcher waits for the halt and gets it; an open gate gives nil at the deadline")
    func waitUntilHalted() async throws {
        let gate = HaltGate()
        #expect(await gate.waitUntilHalted(deadline: .now + .milliseconds(20)) == nil)
        async let halt = gate.waitUntilHalted(deadline: .now + .seconds(30))
        try await Task.sleep(for: .milliseconds(20))
        gate.halt(reason: "app default: InvalidProviderToken")
        #expect(await halt?.reason == "app default: InvalidProviderToken")
        #expect(await gate.waitUntilHalted(deadline: .now)?.reason == "app default: InvalidProviderToken")
    }

    @Test("a waiting sender can be cancelled")
    func cancellation() async throws {
        let gate = HaltGate()
        gate.halt(reason: "unreachable")
        let task = Task { try await gate.waitUntilOpen() }
        try await Task.sleep(for: .milliseconds(20))
        task.cancel()
        await #expect(throws: CancellationError.self) { try await task.value }
    }
}

/// A thread-safe count shared by test tasks.
final class Counter: Sendable {
    private let count = Mutex(0)
    func increment() { self.count.withLock { $0 += 1 } }
    var value: Int { self.count.withLock { $0 } }
}
