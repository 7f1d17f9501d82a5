import APNSCore
import Configuration
import Foundation
import Logging
import Synchronization
import TestWaiting
import Testing

@testable import Bridge
@testable import BridgeCore

/// Replacing the APNs senders on a reload (docs/configuration.md, "Reloading"): new notifications go to the new
/// sender at once, the old one finishes what it has and only then shuts down.
@Suite("Reloadable sender")
struct ReloadableSenderTests {
    /// A sender that keeps every notification's completion until ``answerAll()``.
    final class HoldingSender: ManagedSender {
        private struct State {
            var held: [(token: String, completion: @Sendable (APNSResult) -> Void)] = []
            var received: [String] = []
            var shutDown = false
        }
        private let state = Mutex(State())
        private let stopped = AsyncStream<Void>.makeStream()

        var received: [String] { self.state.withLock { $0.received } }
        var isShutDown: Bool { self.state.withLock { $0.shutDown } }

        func send(contentsOf batch: consuming [SendRequest]) {
            let requests = consume batch
            self.state.withLock { state in
                for request in requests {
                    state.received.append(request.notification.deviceToken)
                    state.held.append((request.notification.deviceToken, request.completion))
                }
            }
        }

        func answerAll() {
            let held = self.state.withLock { state in
                defer { state.held = [] }
                return state.held
            }
            for entry in held {
                entry.completion(.answered(APNSResponse(status: 200, reason: nil, invalidSinceEpochMilliseconds: nil)))
            }
        }

        var openConnections: Int { self.isShutDown ? 0 : 1 }
        func validate(_ notification: APNSCore.Notification, payloadIsJSONObject: Bool, app: String?) -> Reason? { nil }
        func providerProtocol(app: String?) -> APNSSettings.ProviderProtocol { .http2 }
        var sendsOnlyHTTP2: Bool { true }
        func run() async {
            for await _ in self.stopped.stream {}
        }
        func shutdown() async {
            self.state.withLock { $0.shutDown = true }
            self.stopped.continuation.finish()
        }
    }

    static func request(_ token: String, answered: Answers) -> SendRequest {
        SendRequest(notification: Self.notification(token), app: nil) { _ in answered.add(token) }
    }

    static func notification(_ token: String) -> APNSCore.Notification {
        APNSCore.Notification(
            deviceToken: token, topic: "com.example", pushType: .alert, expirationEpochSeconds: nil, id: UUID(),
            payload: Array(#"{"aps":{}}"#.utf8))
    }

    final class Answers: Sendable {
        private let tokens = Mutex<[String]>([])
        func add(_ token: String) { self.tokens.withLock { $0.append(token) } }
        var all: [String] { self.tokens.withLock { $0 } }
    }

    static var quietLogger: Logger {
        var logger = Logger(label: "test")
        logger.logLevel = .critical
        return logger
    }

    @Test("after a replacement new notifications go to the new sender; the old one shuts down after its last answer")
    func oldSenderFinishesFirst() async throws {
        let old = HoldingSender()
        let new = HoldingSender()
        let sender = ReloadableSender(old, retireTimeout: .seconds(600), logger: Self.quietLogger)
        let answers = Answers()
        let running = Task { await sender.run() }
        sender.send(contentsOf: ["a1", "a2"].map { Self.request($0, answered: answers) })
        sender.send(Self.notification("a3"), app: nil) { _ in answers.add("a3") }

        await sender.replace(with: new)
        sender.send(contentsOf: ["b1", "b2"].map { Self.request($0, answered: answers) })
        #expect(old.received == ["a1", "a2", "a3"])
        #expect(new.received == ["b1", "b2"])
        #expect(sender.openConnections == 2, "the old sender's connections are not counted while it finishes")
        // It still has answers to give: it must not be shut down. (A short wait can only prove less under load.)
        try await Task.sleep(for: .milliseconds(100))
        #expect(!old.isShutDown, "the old sender was shut down with notifications on their way")

        old.answerAll()
        try await waitUntil { old.isShutDown && sender.retiringCount == 0 }
        #expect(answers.all.sorted() == ["a1", "a2", "a3"])
        #expect(!new.isShutDown)

        new.answerAll()
        await sender.shutdown()
        await running.value
        #expect(new.isShutDown)
        #expect(answers.all.sorted() == ["a1", "a2", "a3", "b1", "b2"])
    }

    @Test("an old sender that never answers is shut down after the retire timeout")
    func silentOldSenderIsShutDownAfterTimeout() async throws {
        let old = HoldingSender()
        let sender = ReloadableSender(old, retireTimeout: .milliseconds(200), logger: Self.quietLogger)
        let running = Task { await sender.run() }
        sender.send(Self.notification("a1"), app: nil) { _ in }
        let replaced = ContinuousClock.now
        await sender.replace(with: HoldingSender())
        try await waitUntil { old.isShutDown }
        #expect(ContinuousClock.now - replaced >= .milliseconds(200))
        await sender.shutdown()
        await running.value
    }

    @Test("a sender handed over after shutdown is shut down at once, and takes nothing")
    func replacementAfterShutdown() async throws {
        let sender = ReloadableSender(HoldingSender(), retireTimeout: .seconds(600), logger: Self.quietLogger)
        let running = Task { await sender.run() }
        await sender.shutdown()
        await running.value
        let late = HoldingSender()
        await sender.replace(with: late)
        #expect(late.isShutDown)
    }
}
