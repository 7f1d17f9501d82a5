import Waiting

extension APNSResult {
    /// Starts a send that reports its result to a completion (`start` calls the completion it is given once, from any
    /// thread, possibly before it returns) and waits for that result: the one awaiting form of every sender, written
    /// here once. A task cancelled meanwhile gets `.failed(.connectionLost)` at once, as a request cancelled on its
    /// connection does; the send itself goes on until its answer or its timeout, and that answer is dropped.
    package static func awaiting(_ start: (@escaping @Sendable (APNSResult) -> Void) -> Void) async -> APNSResult {
        let answer = AsyncCondition<APNSResult?>(nil)
        start { result in answer.withLock { $0 = $0 ?? result } }
        return await answer.wait { $0 }.value ?? .failed(.connectionLost)
    }
}
