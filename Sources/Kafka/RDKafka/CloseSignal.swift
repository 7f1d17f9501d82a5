import Dispatch
import Synchronization

/// A one-way "closed" flag that tasks can await, with a bound: every waiter resumes once ``markClosed()``
/// ran, or when its own timeout passes.
final class CloseSignal: Sendable {
    private struct State {
        var done = false
        var waiters: [Int: CheckedContinuation<Bool, Never>] = [:]
        var nextID = 0
    }

    private let state = Mutex(State())

    /// Returns `true` once closed, or `false` when `timeout` passed first (`nil`: no bound).
    @discardableResult
    func waitUntilClosed(timeout: Duration? = nil) async -> Bool {
        await withCheckedContinuation { continuation in
            let id = self.state.withLock { state -> Int? in
                if state.done {
                    return nil
                }
                let id = state.nextID
                state.nextID += 1
                state.waiters[id] = continuation
                return id
            }
            guard let id else {
                continuation.resume(returning: true)
                return
            }
            if let timeout {
                let milliseconds = Int(timeout.milliseconds)
                DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(milliseconds)) {
                    let waiter = self.state.withLock { $0.waiters.removeValue(forKey: id) }
                    waiter?.resume(returning: false)
                }
            }
        }
    }

    func markClosed() {
        let waiters = self.state.withLock { state in
            state.done = true
            defer { state.waiters.removeAll() }
            return state.waiters.values
        }
        for waiter in waiters {
            waiter.resume(returning: true)
        }
    }
}
