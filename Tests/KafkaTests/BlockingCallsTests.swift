import Foundation
import Synchronization
import TestWaiting
import Testing

@testable import Kafka

/// A client's blocking librdkafka calls run on a few long-lived threads of its own (issue 31: not a thread per call).
@Suite("Blocking calls", .timeLimit(.minutes(1)))
struct BlockingCallsTests {
    /// The calling thread, as a number.
    static func thread() -> UInt { UInt(bitPattern: Int(bitPattern: UnsafeRawPointer(bitPattern: pthread_self()))) }

    @Test("a hundred calls one after the other reuse the pool's threads: never more than its maximum")
    func threadsAreReused() async throws {
        let calls = BlockingCalls(name: "test-calls", maximumThreads: 2)
        defer { calls.stop() }
        var threads: Set<UInt> = []
        for index in 0..<100 {
            #expect(try await calls.run { index * 2 } == index * 2)
            threads.insert(try await calls.run { Self.thread() })
        }
        #expect(threads.count <= 2, "\(threads.count) threads for 200 calls")
        #expect(calls.threadCount <= 2)
    }

    @Test("a call that blocks holds one thread: with a pool of one, the next waits, and a timed call gives up")
    func blockedCallHoldsOneThread() async throws {
        let calls = BlockingCalls(name: "test-calls", maximumThreads: 1)
        defer { calls.stop() }
        let release = DispatchSemaphore(value: 0)
        let started = Flag()
        let blocked = Task {
            try await calls.run {
                started.set()
                release.wait()
            }
        }
        #expect(try await eventually { started.isSet })
        await #expect(throws: KafkaError.self) {
            try await calls.run(timeout: .milliseconds(100)) { 1 }
        }
        release.signal()
        try await blocked.value
        #expect(try await calls.run { "after" } == "after")
        #expect(calls.threadCount == 1)
    }

    @Test("two calls that block take two threads of a pool of two; neither waits for the other")
    func blockedCallsRunSideBySide() async throws {
        let calls = BlockingCalls(name: "test-calls", maximumThreads: 2)
        defer { calls.stop() }
        let arrived = DispatchSemaphore(value: 0)
        let release = DispatchSemaphore(value: 0)
        let first = Task {
            try await calls.run {
                arrived.signal()
                release.wait()
            }
        }
        // The second signals the first: it can only run while the first still holds its thread.
        try await calls.run { arrived.wait() }
        release.signal()
        try await first.value
        #expect(calls.threadCount == 2)
    }

    @Test("stop ends the idle threads; a call after it still runs, on a thread of its own")
    func stopEndsTheThreads() async throws {
        let calls = BlockingCalls(name: "test-calls", maximumThreads: 3)
        _ = try await calls.run { 1 }
        #expect(calls.threadCount == 1)
        calls.stop()
        #expect(try await eventually(timeout: .seconds(30)) { calls.threadCount == 0 })
        #expect(try await calls.run { 7 } == 7)
        #expect(calls.threadCount == 0)
    }
}

/// A flag one thread sets and another reads.
private final class Flag: Sendable {
    private let value = Atomic<Bool>(false)
    func set() { self.value.store(true, ordering: .releasing) }
    var isSet: Bool { self.value.load(ordering: .acquiring) }
}
