import Foundation
import Synchronization

/// Wakes a mock cluster's thread while a call to it waits, so that no call waits for the thread's next poll timeout.
///
/// librdkafka 2.0.2's mock cluster serves its calls (`rd_kafka_mock_topic_create`, `…_broker_set_down`, the
/// terminate of `rd_kafka_mock_cluster_destroy`) from a queue that wakes its thread through a pipe, with at most one
/// wake-up byte in flight. The thread serves the queue and only then drains the pipe: a call made after the queue
/// was served and before the pipe was drained (the next call of a test that makes several in a row, most often)
/// loses its wake-up, and waits for the thread's poll timeout, one second, blocking its caller meanwhile. Measured
/// with 16 threads making mock calls: every thread met it, each time exactly 1.00 s. In the tests' process those
/// callers are Swift's cooperative threads, as many as cores, so a few such calls at once stall every test.
///
/// The cluster's thread also polls its brokers' listening sockets: while a call waits, this connects to one of them
/// every few milliseconds and closes the connection at once. That wakes the thread, which serves the waiting call.
final class MockClusterWaker: Sendable {
    static let shared = MockClusterWaker()

    /// How long a call waits before the first connection; then the interval between connections.
    private static let intervalMilliseconds = 5
    private static let interval: Duration = .milliseconds(intervalMilliseconds)

    private struct Waiting {
        var ports: [UInt16]
        var since: ContinuousClock.Instant
    }

    private let calls = Mutex<(next: UInt64, waiting: [UInt64: Waiting])>((0, [:]))
    /// Signalled when a call starts waiting while none was: the thread sleeps on it while nothing waits.
    private let work = DispatchSemaphore(value: 0)

    private init() {
        startThread(named: "mock-waker") { self.run() }
    }

    /// Runs `body`, a blocking call to the mock cluster whose brokers listen on `bootstrapServers`
    /// (`127.0.0.1:port,…`), waking the cluster's thread while it waits.
    func whileWaiting<Result>(on bootstrapServers: String, _ body: () throws -> Result) rethrows -> Result {
        let ports = Self.loopbackPorts(bootstrapServers)
        guard !ports.isEmpty else { return try body() }
        let (id, first) = self.calls.withLock { calls in
            calls.next &+= 1
            calls.waiting[calls.next] = Waiting(ports: ports, since: .now)
            return (calls.next, calls.waiting.count == 1)
        }
        if first { self.work.signal() }
        defer { _ = self.calls.withLock { $0.waiting.removeValue(forKey: id) } }
        return try body()
    }

    private func run() {
        while true {
            let due = self.calls.withLock { calls -> [UInt16]? in
                guard !calls.waiting.isEmpty else { return nil }
                let now = ContinuousClock.now
                return calls.waiting.values.filter { now - $0.since >= Self.interval }.flatMap(\.ports)
            }
            guard let due else {
                self.work.wait()
                continue
            }
            for port in Set(due) { Self.connectAndClose(port: port) }
            usleep(useconds_t(Self.intervalMilliseconds * 1000))
        }
    }

    /// The ports of the `127.0.0.1:port` entries of a bootstrap list (the mock cluster's brokers listen there).
    static func loopbackPorts(_ bootstrapServers: String) -> [UInt16] {
        bootstrapServers.split(separator: ",").compactMap { entry in
            let parts = entry.split(separator: ":")
            guard parts.count == 2, parts[0] == "127.0.0.1" else { return nil }
            return UInt16(parts[1])
        }
    }

    /// A non-blocking connection to `127.0.0.1:port`, closed at once: the listener turns readable either way.
    private static func connectAndClose(port: UInt16) {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
        guard fd >= 0 else { return }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
        _ = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
    }
}
