import Synchronization

extension APNSResult {
    /// Starts a send that reports its result to a completion (`start` calls the completion it is given once, from any
    /// thread, possibly before it returns) and waits for that result: the one awaiting form of every sender, written
    /// here once. A task cancelled meanwhile gets `.failed(.connectionLost)` at once, as a request cancelled on its
    /// connection does; the send itself goes on until its answer or its timeout, and that answer is dropped.
    package static func awaiting(_ start: (@escaping @Sendable (APNSResult) -> Void) -> Void) async -> APNSResult {
        let answer = AwaitedAnswer()
        return await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                answer.wait(with: continuation)
                start { answer.resume(with: $0) }
            }
        } onCancel: {
            answer.resume(with: .failed(.connectionLost))
        }
    }
}

/// The one answer ``APNSResult/awaiting(_:)`` waits for: the first of the result and the cancellation resumes the
/// waiting task, whichever order they and the wait come in.
private final class AwaitedAnswer: Sendable {
    private enum State {
        case idle
        case waiting(CheckedContinuation<APNSResult, Never>)
        case answered(APNSResult)
        case resumed
    }

    private let state = Mutex(State.idle)

    func wait(with continuation: CheckedContinuation<APNSResult, Never>) {
        let early = self.state.withLock { state -> APNSResult? in
            guard case .answered(let result) = state else {
                state = .waiting(continuation)
                return nil
            }
            state = .resumed
            return result
        }
        if let early { continuation.resume(returning: early) }
    }

    func resume(with result: APNSResult) {
        let waiting = self.state.withLock { state -> CheckedContinuation<APNSResult, Never>? in
            switch state {
            case .idle:
                state = .answered(result)
                return nil
            case .waiting(let continuation):
                state = .resumed
                return continuation
            case .answered, .resumed:
                return nil
            }
        }
        waiting?.resume(returning: result)
    }
}
