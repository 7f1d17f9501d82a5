import HTTP2
import Logging
import NIOCore
import Waiting

/// N HTTP/2 connections to one APNs endpoint: requests go to the least-loaded live connection; a connection
/// that went away (GOAWAY, loss) is replaced by a fresh one (fresh DNS), and failed connection attempts back
/// off exponentially with jitter.
///
/// ``run()`` owns the connections: it opens those that are replaced or added while requests go on (each in a task
/// of its task group), and closes every connection when it ends. A lease that finds no connection open opens one
/// itself, in the leasing task.
final class ConnectionPool: Sendable {
    private enum Slot {
        case empty
        case connecting
        case ready(HTTP2ClientConnection)
        case backingOff(until: ContinuousClock.Instant)
    }

    private struct State {
        var slots: [Slot]
        var consecutiveFailures: [Int]
        var lastConnectError: String?
        var isShutDown = false
        /// Requests leased per connection and not yet released: the load the least-loaded choice compares.
        /// Counted here, at lease time, because the connection's own counters lag behind a burst of leases.
        var inFlight: [ObjectIdentifier: Int] = [:]
        /// Incremented when a connection opens or fails, and at shutdown: what a lease waiting for a connection
        /// waits for.
        var generation = 0
    }

    /// Slots marked connecting for ``run()`` to open. Apart from ``state``: ``run()`` always waits, and a waiter on
    /// ``state`` would make every lease and release check it.
    private struct ConnectRequests {
        var slots: [Int] = []
        var shutDown = false
    }

    private enum Choice {
        case use(HTTP2ClientConnection, connectInBackground: [Int])
        case connect(Int, alsoInBackground: [Int])
        case wait(until: ContinuousClock.Instant?)
        case shutDown
    }

    private let configuration: HTTP2ClientConfiguration
    private let reconnectInitialDelay: Duration
    private let reconnectMaximumDelay: Duration
    private let eventLoopGroup: any EventLoopGroup
    private let logger: Logger
    private let state: AsyncCondition<State>
    private let connectRequests = AsyncCondition(ConnectRequests())

    init(
        size: Int,
        configuration: HTTP2ClientConfiguration,
        reconnectInitialDelay: Duration,
        reconnectMaximumDelay: Duration,
        eventLoopGroup: any EventLoopGroup,
        logger: Logger
    ) {
        self.configuration = configuration
        self.reconnectInitialDelay = reconnectInitialDelay
        self.reconnectMaximumDelay = reconnectMaximumDelay
        self.eventLoopGroup = eventLoopGroup
        self.logger = logger
        self.state = AsyncCondition(
            State(slots: Array(repeating: .empty, count: size), consecutiveFailures: Array(repeating: 0, count: size)))
    }

    /// A pool of `configuration.connectionCount` connections to `configuration.endpoint`, with its TLS
    /// settings and client certificate, timeouts and reconnect delays; responses keep only
    /// `keptResponseHeaders` and bodies of at most `maxResponseBodyBytes`.
    convenience init(
        _ configuration: APNSClientConfiguration,
        maxResponseBodyBytes: Int,
        keptResponseHeaders: [String],
        eventLoopGroup: any EventLoopGroup,
        logger: Logger
    ) {
        var tls = HTTP2ClientTLS(
            additionalTrustRootsPEMFile: configuration.additionalTrustRootsPEMFile,
            trustSystemRoots: configuration.trustSystemRoots
        )
        if case .certificate(let credentials) = configuration.authentication {
            tls.clientCertificateChain = credentials.certificateChain
            tls.clientPrivateKey = credentials.privateKey
        }
        self.init(
            size: configuration.connectionCount,
            configuration: HTTP2ClientConfiguration(
                host: configuration.endpoint.host,
                port: configuration.endpoint.port,
                proxy: configuration.proxy,
                tls: tls,
                maxConcurrentStreams: configuration.maxConcurrentStreamsPerConnection,
                requestTimeout: configuration.requestTimeout,
                connectTimeout: configuration.connectTimeout,
                maxResponseBodyBytes: maxResponseBodyBytes,
                keptResponseHeaders: keptResponseHeaders
            ),
            reconnectInitialDelay: configuration.reconnectInitialDelay,
            reconnectMaximumDelay: configuration.reconnectMaximumDelay,
            eventLoopGroup: eventLoopGroup,
            logger: logger
        )
    }

    /// Connections open and accepting requests now.
    var openConnections: Int {
        self.state.read { state in
            state.slots.reduce(0) { count, slot in
                if case .ready(let connection) = slot, connection.isAcceptingRequests { return count + 1 }
                return count
            }
        }
    }

    /// The last connection failure, for an `unreachable` result.
    var lastConnectError: String? { self.state.read { $0.lastConnectError } }

    /// A live connection, connecting one first when none is; `nil` when none could be had before `deadline`.
    func lease(deadline: ContinuousClock.Instant) async -> HTTP2ClientConnection? {
        while true {
            let generation = self.state.read { $0.generation }
            switch self.choose() {
            case .shutDown:
                return nil
            case .use(let connection, let background):
                self.connectInBackground(background)
                return connection
            case .connect(let index, let background):
                self.connectInBackground(background)
                if let connection = await self.connect(slot: index) {
                    self.state.withLock { $0.inFlight[ObjectIdentifier(connection), default: 0] += 1 }
                    return connection
                }
            case .wait(let until):
                let now = ContinuousClock.now
                if now >= deadline { return nil }
                let wakeAt = min(until ?? deadline, deadline)
                let changed = await self.state.wait(deadline: wakeAt) { $0.generation != generation ? () : nil }
                if case .cancelled = changed { return nil }
            }
            if ContinuousClock.now >= deadline { return nil }
        }
    }

    /// A live connection when one is open now, without waiting; `nil` when one would first have to be opened or
    /// waited for (then ``lease(deadline:)`` does that). Leased for `count` requests, each released on its own
    /// (``release(_:)``).
    func leaseNow(count: Int = 1) -> HTTP2ClientConnection? {
        switch self.choose(count: count) {
        case .use(let connection, let background):
            self.connectInBackground(background)
            return connection
        case .connect(let index, let background):
            // The slots are marked connecting: someone must connect them.
            self.connectInBackground([index] + background)
            return nil
        case .wait, .shutDown:
            return nil
        }
    }

    /// Returns a connection from ``lease(deadline:)`` once its request finished.
    func release(_ connection: HTTP2ClientConnection) {
        self.state.withLock { state in
            let id = ObjectIdentifier(connection)
            let remaining = (state.inFlight[id] ?? 1) - 1
            state.inFlight[id] = remaining > 0 ? remaining : nil
        }
    }

    /// Opens the connections asked for in the background until ``shutdown()`` or cancellation; then shuts the pool
    /// down, after the connection attempts under way ended (each within the connect timeout).
    func run() async {
        await withDiscardingTaskGroup { group in
            while true {
                let requested = await self.connectRequests.wait { requests -> [Int]? in
                    if requests.shutDown { return [] }
                    guard !requests.slots.isEmpty else { return nil }
                    defer { requests.slots.removeAll() }
                    return requests.slots
                }
                guard let slots = requested.value, !slots.isEmpty else { break }
                for index in slots {
                    group.addTask { _ = await self.connect(slot: index) }
                }
            }
        }
        await self.shutdown()
    }

    /// Closes every connection; later leases fail, and ``run()`` ends.
    func shutdown() async {
        self.connectRequests.withLock { $0.shutDown = true }
        let connections = self.state.withLock { state in
            state.isShutDown = true
            let open = state.slots.compactMap { slot -> HTTP2ClientConnection? in
                if case .ready(let connection) = slot { return connection }
                return nil
            }
            state.slots = state.slots.map { _ in .empty }
            state.generation += 1
            return open
        }
        await withTaskGroup(of: Void.self) { group in
            for connection in connections {
                group.addTask { await connection.close() }
            }
        }
    }

    private func choose(count: Int = 1) -> Choice {
        let now = ContinuousClock.now
        return self.state.withLock { state in
            if state.isShutDown { return .shutDown }
            var best: (connection: HTTP2ClientConnection, load: Int)?
            var connectable: [Int] = []
            var earliestRetry: ContinuousClock.Instant?
            for index in state.slots.indices {
                switch state.slots[index] {
                case .ready(let connection):
                    let connectionState = connection.state
                    if connectionState.isAcceptingRequests {
                        let load = state.inFlight[ObjectIdentifier(connection)] ?? 0
                        if let current = best, current.load <= load { continue }
                        best = (connection, load)
                    } else if Self.served(connectionState) {
                        // GOAWAY or loss after real work: the connection finishes its streams by itself; the slot
                        // gets a new one at once, and the backoff starts over.
                        state.consecutiveFailures[index] = 0
                        state.slots[index] = .empty
                        connectable.append(index)
                    } else {
                        // Gone before serving anything (a server that sends GOAWAY right after SETTINGS, or drops
                        // every connection): a failed attempt, so the slot backs off instead of reconnecting in a
                        // tight loop.
                        state.consecutiveFailures[index] += 1
                        let delay = Self.backoff(
                            failures: state.consecutiveFailures[index], initial: self.reconnectInitialDelay,
                            maximum: self.reconnectMaximumDelay
                        )
                        state.slots[index] = .backingOff(until: now + delay)
                        state.lastConnectError = "the connection closed before serving any response"
                        earliestRetry = min(earliestRetry ?? now + delay, now + delay)
                    }
                case .empty:
                    connectable.append(index)
                case .backingOff(let until):
                    if until <= now {
                        connectable.append(index)
                    } else {
                        earliestRetry = min(earliestRetry ?? until, until)
                    }
                case .connecting:
                    break
                }
            }
            for index in connectable { state.slots[index] = .connecting }
            if let best {
                state.inFlight[ObjectIdentifier(best.connection), default: 0] += count
                return .use(best.connection, connectInBackground: connectable)
            }
            if let first = connectable.first {
                return .connect(first, alsoInBackground: Array(connectable.dropFirst()))
            }
            return .wait(until: earliestRetry)
        }
    }

    /// Hands slots marked connecting to ``run()``: a replacement connection must not hold up the request that
    /// noticed the need for it.
    private func connectInBackground(_ slots: [Int]) {
        guard !slots.isEmpty else { return }
        self.connectRequests.withLock { $0.slots += slots }
    }

    private func connect(slot index: Int) async -> HTTP2ClientConnection? {
        do {
            let connection = try await HTTP2ClientConnection.connect(
                configuration: self.configuration,
                eventLoopGroup: self.eventLoopGroup,
                logger: self.logger
            )
            let accepted = self.state.withLock { state in
                guard !state.isShutDown else { return false }
                // The failure count is not reset here: SETTINGS alone prove little (see `served`).
                state.slots[index] = .ready(connection)
                state.generation += 1
                return true
            }
            if !accepted {
                await connection.close()
                return nil
            }
            self.logger.debug("apns connection opened", metadata: ["apns.slot": "\(index)"])
            return connection
        } catch {
            let delay = self.state.withLock { state in
                state.consecutiveFailures[index] += 1
                let failures = state.consecutiveFailures[index]
                let delay = Self.backoff(
                    failures: failures, initial: self.reconnectInitialDelay, maximum: self.reconnectMaximumDelay
                )
                state.slots[index] = .backingOff(until: .now + delay)
                state.lastConnectError = "\(error)"
                state.generation += 1
                return delay
            }
            self.logger.warning(
                "apns connection failed",
                error: error,
                metadata: ["apns.slot": "\(index)", "apns.retry_in": "\(delay)"]
            )
            return nil
        }
    }

    /// Whether a connection did real work before it went away: a request on it got an answer. Only then does a
    /// slot's reconnect backoff start over. A PING ACK proves nothing (a server can send one unasked, then GOAWAY,
    /// on every connection); an idle connection that APNs closes after hours without ever carrying a request
    /// costs one initial delay (the device client and the channel management client share this pool).
    static func served(_ state: HTTP2ConnectionState) -> Bool {
        state.responsesReceived > 0
    }

    /// Exponential backoff with jitter: `initial * 2^(failures-1)`, capped at `maximum`, then scaled by a
    /// random factor in 0.5...1 so that many clients do not reconnect in step. Saturates instead of
    /// overflowing for any `initial`.
    static func backoff(failures: Int, initial: Duration, maximum: Duration) -> Duration {
        let exponent = min(max(failures - 1, 0), 30)
        let factor = 1 << exponent
        // `initial * factor` could overflow Duration for a huge `initial`; compare by division instead.
        let capped = initial > maximum / factor ? maximum : initial * factor
        return capped * Double.random(in: 0.5...1)
    }
}
