import Synchronization

/// A one-way "closed" flag that tasks can await: every waiter resumes once ``markClosed()`` ran.
final class CloseSignal: Sendable {
    private let state = Mutex<(done: Bool, waiters: [CheckedContinuation<Void, Never>])>((false, []))

    func waitUntilClosed() async {
        await withCheckedContinuation { continuation in
            let done = self.state.withLock { state in
                if !state.done {
                    state.waiters.append(continuation)
                }
                return state.done
            }
            if done {
                continuation.resume()
            }
        }
    }

    func markClosed() {
        let waiters = self.state.withLock { state in
            state.done = true
            defer { state.waiters.removeAll() }
            return state.waiters
        }
        for waiter in waiters {
            waiter.resume()
        }
    }
}
