import Foundation
import Synchronization

/// Runs one client's blocking librdkafka calls (commits, watermark and offset queries, flushes) on a few long-lived
/// threads of the client's own, never on Swift's cooperative pool and not on a new thread per call.
///
/// A thread starts when a call finds none idle, up to ``maximumThreads``; beyond that calls wait in order. So a call
/// that waits for an unreachable broker (a commit waits up to `socket.timeout.ms`) holds one thread, and the next
/// calls take the others. ``stop()`` ends the threads once they are idle; a call made after it runs on a thread of its
/// own, so nothing waits for a pool that is gone.
final class BlockingCalls: @unchecked Sendable {
    /// The threads' name, as `top -H` and `/proc/<pid>/task/*/comm` show it (at most 15 bytes).
    let name: String
    /// How many threads run calls at once, at most.
    let maximumThreads: Int

    // Guarded by `condition`.
    private let condition = NSCondition()
    private var jobs: [@Sendable () -> Void] = []
    private var idle = 0
    private var threads = 0
    private var stopped = false

    init(name: String, maximumThreads: Int = 4) {
        precondition(name.utf8.count <= 15, "thread name '\(name)' is longer than Linux's 15 bytes")
        self.name = name
        self.maximumThreads = max(1, maximumThreads)
    }

    /// The threads running now (busy or idle), for tests.
    var threadCount: Int {
        self.condition.lock()
        defer { self.condition.unlock() }
        return self.threads
    }

    /// Runs `body` on one of the threads and awaits its result.
    func run<Result: Sendable>(_ body: @escaping @Sendable () throws -> Result) async throws -> Result {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Result, any Error>) in
            self.submit { continuation.resume(with: Swift.Result { try body() }) }
        }
    }

    /// ``run(_:)`` that stops waiting after `timeout`: throws `_TIMED_OUT` then, and leaves the thread to finish
    /// `body` on its own (its result is dropped). For librdkafka calls that take no timeout of their own and can
    /// block for as long as a broker is away (a synchronous commit waits for the coordinator up to
    /// `socket.timeout.ms`, a minute by default).
    func run<Result: Sendable>(timeout: Duration, _ body: @escaping @Sendable () throws -> Result) async throws
        -> Result
    {
        let resumed = Atomic<Bool>(false)
        return try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Result, any Error>) in
            let resumeOnce = { @Sendable (result: Swift.Result<Result, any Error>) in
                if !resumed.exchange(true, ordering: .acquiringAndReleasing) { continuation.resume(with: result) }
            }
            self.submit { resumeOnce(Swift.Result { try body() }) }
            DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(Int(timeout.milliseconds))) {
                resumeOnce(
                    .failure(KafkaError(code: .timedOut, message: "no answer within \(timeout.milliseconds) ms")))
            }
        }
    }

    /// Ends the threads once they are idle (a call in progress finishes first). Safe to call more than once.
    func stop() {
        self.condition.lock()
        self.stopped = true
        self.condition.broadcast()
        self.condition.unlock()
    }

    private func submit(_ job: @escaping @Sendable () -> Void) {
        self.condition.lock()
        guard !self.stopped else {
            self.condition.unlock()
            startThread(named: self.name, job)
            return
        }
        self.jobs.append(job)
        if self.idle > 0 {
            self.condition.signal()
        } else if self.threads < self.maximumThreads {
            self.threads += 1
            startThread(named: self.name) { self.work() }
        }
        self.condition.unlock()
    }

    /// A thread's loop: the oldest call first, until stopped with nothing left.
    private func work() {
        self.condition.lock()
        while true {
            while self.jobs.isEmpty && !self.stopped {
                self.idle += 1
                self.condition.wait()
                self.idle -= 1
            }
            guard !self.jobs.isEmpty else {
                self.threads -= 1
                self.condition.unlock()
                return
            }
            // A handful at most: the callers await each call.
            let job = self.jobs.removeFirst()
            self.condition.unlock()
            job()
            self.condition.lock()
        }
    }
}
