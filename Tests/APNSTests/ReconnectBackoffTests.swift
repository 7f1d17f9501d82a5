import Testing

@testable import APNSClient

@Suite("Reconnect backoff")
struct ReconnectBackoffTests {
    @Test("the delay doubles per failure, with jitter in the upper half, capped at the maximum")
    func exponentialWithJitter() {
        func delays(failures: Int) -> [Duration] {
            (0..<200).map { _ in
                ConnectionPool.backoff(failures: failures, initial: .milliseconds(100), maximum: .seconds(30))
            }
        }
        #expect(delays(failures: 1).allSatisfy { $0 >= .milliseconds(50) && $0 <= .milliseconds(100) })
        #expect(delays(failures: 5).allSatisfy { $0 >= .milliseconds(800) && $0 <= .milliseconds(1600) })
        #expect(delays(failures: 40).allSatisfy { $0 >= .seconds(15) && $0 <= .seconds(30) })
        #expect(Set(delays(failures: 3)).count > 1)
    }
}
