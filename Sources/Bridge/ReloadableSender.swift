import APNSCore
import BridgeCore
import Configuration
import Logging
import Synchronization

/// The pipeline's sender when the configuration can be reloaded: it hands every notification to the sender in force,
/// and a reload replaces that sender (``replace(with:)``) while notifications are on their way.
///
/// A replaced sender takes no new notification from the moment of the swap; it is shut down once every notification
/// handed to it has its answer (so its HTTP/2 connections, with the old key or client certificate, close only after
/// their last stream), or after `retireTimeout` at most. Nothing is handed to two senders, and nothing handed to the
/// old one is cut off: a retry after the swap goes to the new one.
///
/// What it costs per notification: the count of what each sender has on its way is one atomic increment under the
/// lock that reads the sender in force (one lock per batch handed over together) and one atomic decrement on the
/// answer; and each completion is wrapped in a closure that does the decrement (one small allocation).
package final class ReloadableSender: ManagedSender {
    /// One sender and what it has on its way.
    private final class Generation: Sendable {
        let sender: any ManagedSender
        /// Notifications handed to it and not yet answered.
        let pending = Atomic<Int>(0)
        private let closed = Atomic<Bool>(false)

        init(_ sender: any ManagedSender) {
            self.sender = sender
        }

        func finished(_ count: Int = 1) {
            self.pending.subtract(count, ordering: .releasing)
        }

        /// Shuts the sender down, once.
        func close() async {
            guard self.closed.compareExchange(expected: false, desired: true, ordering: .relaxed).exchanged else {
                return
            }
            await self.sender.shutdown()
        }
    }

    private enum Command: Sendable {
        case run(Generation)
        case retire(Generation)
    }

    private struct State {
        var current: Generation
        var retiring: [ObjectIdentifier: Generation] = [:]
        var isShutDown = false
    }

    private let state: Mutex<State>
    /// ``ManagedSender/sendsOnlyHTTP2`` of the sender in force, read without the lock.
    private let onlyHTTP2: Atomic<Bool>
    private let commands = AsyncStream<Command>.makeStream()
    private let retireTimeout: Duration
    private let logger: Logger

    /// Sends through `sender` until a reload replaces it; a replaced sender is shut down at most `retireTimeout` after
    /// the swap, whatever it still has on its way (those notifications then end as the sender's shutdown decides).
    package init(_ sender: any ManagedSender, retireTimeout: Duration, logger: Logger) {
        let first = Generation(sender)
        self.state = Mutex(State(current: first))
        self.onlyHTTP2 = Atomic(sender.sendsOnlyHTTP2)
        self.retireTimeout = retireTimeout
        self.logger = logger
        self.commands.continuation.yield(.run(first))
    }

    /// The sender in force.
    package var current: any ManagedSender { self.state.withLock { $0.current.sender } }

    /// Senders replaced and not yet shut down.
    package var retiringCount: Int { self.state.withLock { $0.retiring.count } }

    /// Hands later notifications to `sender`, runs it, and shuts the one it replaces down once that one has answered
    /// everything it was handed. After ``shutdown()``, `sender` is shut down at once instead.
    package func replace(with sender: any ManagedSender) async {
        let next = Generation(sender)
        let previous = self.state.withLock { state -> Generation? in
            guard !state.isShutDown else { return nil }
            let previous = state.current
            state.current = next
            self.onlyHTTP2.store(sender.sendsOnlyHTTP2, ordering: .relaxed)
            state.retiring[ObjectIdentifier(previous)] = previous
            return previous
        }
        guard let previous else {
            await next.close()
            return
        }
        self.commands.continuation.yield(.run(next))
        self.commands.continuation.yield(.retire(previous))
    }

    /// The sender in force, counted as having `count` more notifications on their way: under the same lock as the
    /// swap, so a replaced sender's count only falls after the swap.
    private func enter(_ count: Int) -> Generation {
        self.state.withLock { state in
            state.current.pending.add(count, ordering: .relaxed)
            return state.current
        }
    }

    package func send(contentsOf batch: consuming [SendRequest]) {
        let generation = self.enter(batch.count)
        var counted = consume batch
        for index in counted.indices {
            let completion = counted[index].completion
            counted[index].completion = { result in
                generation.finished()
                completion(result)
            }
        }
        generation.sender.send(contentsOf: counted)
    }

    package var openConnections: Int {
        let senders = self.state.withLock { [$0.current.sender] + $0.retiring.values.map(\.sender) }
        return senders.reduce(0) { $0 + $1.openConnections }
    }

    package func validate(_ notification: Notification, payloadIsJSONObject: Bool, app: String?) -> Reason? {
        self.current.validate(notification, payloadIsJSONObject: payloadIsJSONObject, app: app)
    }

    package func providerProtocol(app: String?) -> APNSSettings.ProviderProtocol {
        // Asked for every outcome: with only HTTP/2 providers (the usual case), without taking the lock.
        if self.onlyHTTP2.load(ordering: .relaxed) { return .http2 }
        return self.current.providerProtocol(app: app)
    }

    package var sendsOnlyHTTP2: Bool { self.onlyHTTP2.load(ordering: .relaxed) }

    /// Runs the sender in force and every sender a reload brings, and retires the replaced ones, until
    /// ``shutdown()``.
    package func run() async {
        await withDiscardingTaskGroup { group in
            for await command in self.commands.stream {
                switch command {
                case .run(let generation):
                    group.addTask { await generation.sender.run() }
                case .retire(let generation):
                    group.addTask { await self.retire(generation) }
                }
            }
        }
    }

    /// Waits until `generation` answered everything it was handed (at most ``retireTimeout``, and not past
    /// ``shutdown()``), then shuts it down.
    private func retire(_ generation: Generation) async {
        let deadline = ContinuousClock.now + self.retireTimeout
        while generation.pending.load(ordering: .acquiring) > 0, ContinuousClock.now < deadline,
            !self.state.withLock({ $0.isShutDown })
        {
            // Polled: a reload is rare, and a wake-up per answer would cost every notification a signal.
            try? await Task.sleep(for: Self.retirePollInterval)
        }
        let unanswered = generation.pending.load(ordering: .acquiring)
        await generation.close()
        _ = self.state.withLock { $0.retiring.removeValue(forKey: ObjectIdentifier(generation)) }
        if unanswered > 0 {
            self.logger.warning(
                "Previous APNs sender shut down with notifications still on their way",
                metadata: ["reload.unanswered": "\(unanswered)"])
        } else {
            self.logger.info("Previous APNs sender shut down after its last answer")
        }
    }

    /// How often a retiring sender's count is looked at.
    static let retirePollInterval: Duration = .milliseconds(20)

    /// Shuts down the sender in force and every one still retiring, and ends ``run()``. The pipeline drained first,
    /// so none has anything on its way but what the drain abandoned.
    package func shutdown() async {
        let generations = self.state.withLock { state in
            state.isShutDown = true
            return [state.current] + Array(state.retiring.values)
        }
        self.commands.continuation.finish()
        for generation in generations {
            await generation.close()
        }
    }
}
