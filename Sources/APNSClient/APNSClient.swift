import APNSCore
import HTTP2
import Logging
import NIOCore
import NIOPosix
import SafeText
import Synchronization

/// Sends notifications to APNs over a pool of HTTP/2 connections.
///
/// ``send(_:)`` never throws: every outcome is an ``APNSResult``. Requests the server did not process
/// (above a GOAWAY's last stream, or on a connection lost before the answer) are sent again on another
/// connection, up to ``APNSClientConfiguration/maxResends`` times. With token authentication one provider token
/// is shared by every connection and renewed by Apple's rules (see ``ProviderTokenSource``); a 403
/// `ExpiredProviderToken` renews it at once and the request is sent again.
///
/// ``run()`` must run while the client is used: it owns the connections and the sends that need waiting (opening a
/// connection, resending, renewing the token), each in a task of its task group. ``shutdown()`` ends it.
/// ``withRunning(_:)`` does both around a body.
package final class APNSClient: Sendable {
    /// The configuration in force.
    package let configuration: APNSClientConfiguration
    private let pool: ConnectionPool
    private let logger: Logger
    private let bearerCache = Mutex<(compact: String, header: String)?>(nil)
    /// Sends that need waiting, for ``run()`` to give a task each.
    private let waitingSends = AsyncStream<@Sendable () async -> Void>.makeStream()

    /// Creates a client. Connections are opened on the first send; ``run()`` must run meanwhile.
    package init(
        configuration: APNSClientConfiguration,
        eventLoopGroup: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton,
        logger: Logger = Logger(label: "pushbridge.apns")
    ) {
        self.configuration = configuration
        self.logger = logger
        self.pool = ConnectionPool(
            configuration,
            maxResponseBodyBytes: Self.maximumResponseBodyBytes,
            // What APNSResponse reads; the rest of a response's headers are never copied.
            keptResponseHeaders: ["apns-id", "apns-unique-id"],
            eventLoopGroup: eventLoopGroup,
            logger: logger
        )
    }

    /// Connections open and accepting requests now (`pushbridge_apns_connections`).
    package var openConnections: Int { self.pool.openConnections }

    /// Sends `notification` and returns APNs' answer or why there was none: ``send(contentsOf:)`` awaited
    /// (``APNSCore/APNSResult/awaiting(_:)``; a task cancelled meanwhile gets `.failed(.connectionLost)` at once).
    ///
    /// A notification that breaks Apple's rules is answered locally with the reason APNs would give
    /// (when ``APNSClientConfiguration/validatesLocally``), without a request.
    package func send(_ notification: Notification) async -> APNSResult {
        await APNSResult.awaiting { self.send(notification, completion: $0) }
    }

    /// Sends `notification` and calls `completion` once with its result, from any thread: ``send(contentsOf:)`` for
    /// one.
    package func send(_ notification: Notification, completion: @escaping @Sendable (APNSResult) -> Void) {
        self.send(contentsOf: [Submission(notification: notification, completion: completion)])
    }

    /// Sends the notifications and calls each one's completion once with its result, from any thread: the one way a
    /// notification goes out. When a connection is open, the requests go out without a task, and a final answer
    /// comes back on the connection's event loop; what needs waiting (opening a connection, resending, renewing the
    /// provider token) continues in a task of ``run()``'s. The requests of one call go to one connection, the least
    /// loaded, leased for all of them at once and handed to it together, so a burst takes the pool's lock and wakes
    /// the connection's event loop once rather than per notification.
    package func send(contentsOf submissions: [Submission]) {
        var prepared: [Prepared] = []
        prepared.reserveCapacity(submissions.count)
        // The provider token and its header once for the whole batch: asked per notification, each took two locks
        // and copied the shared token strings, which every thread that sends or answers counts.
        let (token, bearer, failure) = self.credentials()
        for index in submissions.indices {
            switch self.prepare(submissions[index].notification, token: token, bearer: bearer, failure: failure) {
            case .success(let sending):
                prepared.append(Prepared(sending: sending, completion: submissions[index].completion))
            case .failure(let answer):
                submissions[index].completion(answer.result)
            }
        }
        guard !prepared.isEmpty else { return }
        guard let connection = self.pool.leaseNow(count: prepared.count) else {
            for index in prepared.indices {
                let sending = prepared[index].sending
                self.sendWhenRunning(sending, completion: prepared[index].completion) {
                    await self.finishSending(sending, after: await self.attempt(sending.request))
                }
            }
            return
        }
        var requests: [Request] = []
        requests.reserveCapacity(prepared.count)
        for index in prepared.indices {
            requests.append(
                Request(
                    request: prepared[index].sending.request,
                    completion: self.answer(
                        prepared[index].sending, on: connection, completion: prepared[index].completion)
                ))
        }
        connection.send(contentsOf: requests)
    }

    /// A request ready to go and what to call with its result.
    private struct Prepared {
        let sending: Sending
        let completion: @Sendable (APNSResult) -> Void
    }

    /// A notification and what to call with its result, for ``send(contentsOf:)``. (A struct rather than a
    /// tuple: an array of tuples stores its closures in the generic representation, one thunk per element.)
    package struct Submission: Sendable {
        /// The notification.
        package var notification: Notification
        /// Called once with the result, from any thread.
        package var completion: @Sendable (APNSResult) -> Void

        /// Creates a submission.
        package init(notification: Notification, completion: @escaping @Sendable (APNSResult) -> Void) {
            self.notification = notification
            self.completion = completion
        }
    }

    private typealias Request = HTTP2ClientConnection.Submission

    /// What a request sent without a task does with its answer: a final one goes to `completion` at once, the
    /// rest (resend, renewal) goes on in a task.
    private func answer(
        _ sending: Sending, on connection: HTTP2ClientConnection, completion: @escaping @Sendable (APNSResult) -> Void
    ) -> @Sendable (Result<HTTP2Response, HTTP2Error>) -> Void {
        { result in
            self.pool.release(connection)
            let attempt = Self.attempt(result)
            if case .done(let final) = attempt, !Self.isExpiredProviderToken(final) {
                return completion(final)
            }
            self.sendWhenRunning(sending, completion: completion) { await self.finishSending(sending, after: attempt) }
        }
    }

    /// A request on its way and what its retries need. A class: the answer's closure holds it until the answer
    /// comes, and a struct of a notification and a request would be copied into it field by field (a retain and a
    /// release for each of their dozen strings and arrays).
    private final class Sending: Sendable {
        let notification: Notification
        let request: HTTP2Request
        let token: ProviderTokenJWT?

        init(notification: Notification, request: HTTP2Request, token: ProviderTokenJWT?) {
            self.notification = notification
            self.request = request
            self.token = token
        }
    }

    /// The provider token to send with and its `authorization` value, both `nil` with certificates; or, when the
    /// token cannot be signed, why every request fails.
    private func credentials() -> (token: ProviderTokenJWT?, bearer: String?, failure: PreparedResult?) {
        guard case .token(let source) = self.configuration.authentication else { return (nil, nil, nil) }
        do {
            let token = try source.currentToken()
            return (token, self.bearer(token), nil)
        } catch {
            return (nil, nil, PreparedResult(.failed(.unreachable("cannot sign the provider token: \(error)"))))
        }
    }

    /// The request for `notification` with `token` and its `bearer` header (`nil` with certificates), or why it
    /// is not sent: a local fault, then `failure` (the provider token could not be signed).
    private func prepare(
        _ notification: Notification, token: ProviderTokenJWT?, bearer: String?, failure: PreparedResult?
    ) -> Result<Sending, PreparedResult> {
        if self.configuration.validatesLocally, let reason = NotificationValidation.validate(notification) {
            return .failure(
                PreparedResult(
                    .answered(APNSResponse(status: reason.status ?? 400, apnsID: notification.apnsID, reason: reason))))
        }
        if let failure { return .failure(failure) }
        return .success(
            Sending(notification: notification, request: self.request(notification, bearer: bearer), token: token))
    }

    /// The HTTP/2 request for `notification`, with `bearer` as its `authorization` when token-based.
    private func request(_ notification: Notification, bearer: String?) -> HTTP2Request {
        // Written once into one block of bytes, which the connection hands to nghttp2 as it is (no header
        // strings, no copy on the event loop).
        var fields = HTTP2HeaderBlock(fields: 8, bytes: 384)
        notification.forEachAPNSField { name, value, variesPerRequest in
            // Apple's HPACK guidance: apns-id (a broadcast's apns-request-id), apns-expiration and apns-collapse-id
            // differ from request to request, so only their names go into the tables (ours and APNs'), once per
            // connection; indexing every value would evict the entries that repeat and cost the encoder an
            // insertion per request.
            fields.append(name, value, indexing: variesPerRequest ? .nameOnce : .incremental)
        }
        if let bearer {
            fields.append("authorization", bearer, indexing: .never)
        }
        return HTTP2Request(
            method: "POST", path: notification.path, fields: fields, body: notification.payload,
            expedited: notification.expedited)
    }

    /// A result decided before any request (`Result` needs an `Error`).
    private struct PreparedResult: Error {
        var result: APNSResult

        init(_ result: APNSResult) {
            self.result = result
        }
    }

    /// The `authorization` value for `token`, made once per token rather than once per request.
    private func bearer(_ token: ProviderTokenJWT) -> String {
        if let cached = self.bearerCache.withLock({ $0 }), cached.compact == token.compact { return cached.header }
        let header = "bearer \(token.compact)"
        self.bearerCache.withLock { $0 = (token.compact, header) }
        return header
    }

    private static func isExpiredProviderToken(_ result: APNSResult) -> Bool {
        if case .answered(let response) = result { return response.reason == .expiredProviderToken }
        return false
    }

    /// Goes on from the first attempt's result: resends what the server did not process (or lost with its
    /// connection, up to ``APNSClientConfiguration/maxResends``), renews an expired provider token once.
    private func finishSending(_ sending: Sending, after first: Attempt) async -> APNSResult {
        var request = sending.request
        var token = sending.token
        var renewedToken = false
        var lostResends = 0
        var unprocessedResends = 0
        var result = first
        while true {
            switch result {
            case .resend(let code):
                // A request the server did not process is always safe to send again; one lost with its connection
                // may have been processed, so those resends are bounded by maxResends.
                if code == .notProcessed {
                    unprocessedResends += 1
                } else {
                    lostResends += 1
                }
                if lostResends > self.configuration.maxResends || unprocessedResends > Self.maximumUnprocessedResends {
                    self.logger.debug(
                        "apns resends exhausted", metadata: self.metadata(sending.notification, code.rawValue))
                    return .failed(.connectionLost)
                }
                self.logger.debug("apns request re-sent", metadata: self.metadata(sending.notification, code.rawValue))
            case .done(.answered(let response)) where response.reason == .expiredProviderToken && !renewedToken:
                guard case .token(let source) = self.configuration.authentication, let used = token,
                    let fresh = try? source.tokenAfterExpiry(of: used)
                else { return .answered(response) }
                renewedToken = true
                token = fresh
                request = self.request(sending.notification, bearer: self.bearer(fresh))
                self.logger.info("apns provider token renewed after ExpiredProviderToken")
            case .done(let final):
                return final
            }
            result = await self.attempt(request)
        }
    }

    /// Hands a send that needs waiting to ``run()``; after ``shutdown()`` it fails at once, as every send then does.
    private func sendWhenRunning(
        _ sending: Sending, completion: @escaping @Sendable (APNSResult) -> Void,
        _ send: @escaping @Sendable () async -> APNSResult
    ) {
        if case .terminated = self.waitingSends.continuation.yield({ completion(await send()) }) {
            self.logger.debug("apns send after shutdown", metadata: self.metadata(sending.notification, "shut down"))
            completion(.failed(.unreachable("the APNs client is shut down")))
        }
    }

    /// Runs the client until ``shutdown()`` (or cancellation): opens connections in the background and runs the
    /// sends that need waiting. When it ends, every connection is closed and the sends it ran have finished.
    package func run() async {
        await withDiscardingTaskGroup { group in
            group.addTask { await self.pool.run() }
            // Ends at shutdown(), which shuts the pool down too, or on cancellation, which reaches the pool's run.
            for await send in self.waitingSends.stream {
                group.addTask { await send() }
            }
        }
    }

    /// Runs the client while `body` runs, then shuts it down (also when `body` throws).
    package func withRunning<Result: Sendable>(_ body: () async throws -> Result) async rethrows -> Result {
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { await self.run() }
            do {
                let result = try await body()
                await self.shutdown()
                return result
            } catch {
                await self.shutdown()
                throw error
            }
        }
    }

    /// Closes every connection and ends ``run()``. Sends after this fail with `unreachable`.
    package func shutdown() async {
        self.waitingSends.continuation.finish()
        await self.pool.shutdown()
    }

    /// APNs error bodies are a short JSON object; anything larger fails the request as a malformed response
    /// instead of being buffered.
    static let maximumResponseBodyBytes = 4096
    /// The longest reason string kept from a response, in UTF-8 bytes. Apple's longest is 35.
    static let maximumReasonBytes = 128
    /// The longest `apns-id` / `apns-unique-id` kept from a response (a UUID is 36).
    static let maximumIDBytes = 64
    /// The latest 410 timestamp kept, in milliseconds since the epoch (9999-12-31T23:59:59.999Z).
    static let maximumTimestampMilliseconds: Int64 = 253_402_300_799_999

    /// `response` with everything the server chose made safe to travel into outcomes, logs and metrics: an
    /// unknown reason string at most ``maximumReasonBytes`` long with control characters escaped, ids that are
    /// short visible ASCII (else dropped), and a 410 timestamp within the years 1970 to 9999 (else dropped).
    static func bounded(_ response: borrowing APNSResponse) -> APNSResponse {
        var reason = response.reason
        if case .unknown(let raw) = reason {
            reason = .unknown(Self.boundedReason(raw))
        }
        let since = response.invalidSinceEpochMilliseconds.flatMap {
            (0...Self.maximumTimestampMilliseconds).contains($0) ? $0 : nil
        }
        return APNSResponse(
            status: response.status, apnsID: response.apnsID.flatMap(Self.boundedID),
            apnsUniqueID: response.apnsUniqueID.flatMap(Self.boundedID), reason: reason,
            invalidSinceEpochMilliseconds: since)
    }

    /// At most ``maximumReasonBytes`` UTF-8 bytes of `raw`, control characters (and the escape's own `\`)
    /// written as `\u{..}` so the result stays on one line and is distinct from any documented reason.
    static func boundedReason(_ raw: String) -> String {
        SafeText.excerpt(raw, maxBytes: Self.maximumReasonBytes, alsoEscaping: ["\\"])
    }

    /// `value` when it is 1 to ``maximumIDBytes`` visible ASCII characters, else `nil`.
    static func boundedID(_ value: String) -> String? {
        guard !value.isEmpty, value.utf8.count <= Self.maximumIDBytes,
            value.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F })
        else { return nil }
        return value
    }

    /// A bound on re-sending requests the server refused unprocessed (GOAWAY), against a server that refuses
    /// everything.
    static let maximumUnprocessedResends = 100

    private enum Attempt {
        case done(APNSResult)
        case resend(HTTP2Error.Code)
    }

    private func attempt(_ request: HTTP2Request) async -> Attempt {
        let deadline = ContinuousClock.now + self.configuration.requestTimeout
        guard let connection = await self.pool.lease(deadline: deadline) else {
            return .done(.failed(.unreachable(self.pool.lastConnectError ?? "no connection to APNs could be opened")))
        }
        defer { self.pool.release(connection) }
        do {
            return Self.attempt(.success(try await connection.send(request)))
        } catch let error as HTTP2Error {
            return Self.attempt(.failure(error))
        } catch {
            return .done(.failed(.connectionLost))
        }
    }

    /// What one request's response or error means.
    private static func attempt(_ result: Result<HTTP2Response, HTTP2Error>) -> Attempt {
        switch result {
        case .success(let response):
            let answer = APNSResponse(
                status: response.status,
                headers: response.headers.map { (name: $0.name, value: $0.value) },
                body: response.body
            )
            return .done(.answered(Self.bounded(answer)))
        case .failure(let error):
            switch error.code {
            case .notProcessed, .closed:
                return .resend(.notProcessed)
            case .connectionLost:
                return .resend(.connectionLost)
            case .timeout:
                return .done(.failed(.timeout))
            case .malformedResponse:
                return .done(.failed(.malformedResponse(error.message)))
            case .cancelled:
                return .done(.failed(.connectionLost))
            case .invalidRequest:
                return .done(.failed(.malformedResponse("the request was refused locally: \(error.message)")))
            case .connectFailed, .serverStartFailed:
                return .done(.failed(.unreachable(error.message)))
            }
        }
    }

    private func metadata(_ notification: Notification, _ why: String) -> Logger.Metadata {
        [
            notification.isBroadcast ? "apns.channel" : "apns.token": "\(notification.destinationForLog)",
            "apns.id": "\(notification.apnsID)",
            "apns.why": "\(why)",
        ]
    }
}
