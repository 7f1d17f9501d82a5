import Foundation
import Kafka
import TestSupport

/// The Kafka side of a soak run: librdkafka's mock cluster in this process, Tansu behind the lane's proxy, or kfake.
enum SoakCluster: Sendable {
    case mock(KafkaMockCluster, brokerCount: Int)
    case tansu(TansuBroker)
    case kfake(KfakeBroker)

    static func start(_ options: SoakOptions) async throws -> SoakCluster {
        switch options.broker {
        case .mock:
            // librdkafka's default logger writes to standard error, which run() sends to a file with --mock-debug.
            let properties = options.mockDebug ? ["debug": "mock"] : ["log_level": "3"]
            let cluster = try KafkaMockCluster(
                brokerCount: Int32(options.mockBrokerCount), properties: properties)
            return .mock(cluster, brokerCount: options.mockBrokerCount)
        case .tansu:
            guard TansuBroker.isInstalled else { throw SoakError(TansuBroker.notInstalledMessage) }
            // Longer than the run: the script stops Tansu after this at the latest.
            let lifetime = Duration.seconds(options.durationSeconds + options.settleSeconds + 900)
            return .tansu(try await TansuBroker.start(maxLifetime: lifetime))
        case .kfake:
            let lifetime = Duration.seconds(options.durationSeconds + options.settleSeconds + 900)
            return .kfake(try await KfakeBroker.start(maxLifetime: lifetime))
        }
    }

    var broker: any TestKafkaBroker {
        switch self {
        case .mock(let cluster, _): return cluster
        case .tansu(let broker): return broker
        case .kfake(let broker): return broker
        }
    }

    var description: String {
        switch self {
        case .mock(_, let count): return "librdkafka 2.0.2 mock cluster, \(count) brokers, in the soak's process"
        case .tansu: return "Tansu 0.6.0 (memory storage) behind the lane's ApiVersions proxy (scripts/tansu-broker.py)"
        case .kfake: return "franz-go's kfake, 3 brokers answering as Kafka 3.6 (tools/kfake-broker)"
        }
    }

    /// Every broker unreachable for `duration`: the mock's brokers go down and come up again; Tansu's proxy drops
    /// every connection and refuses new ones (Tansu keeps running: it has memory storage only).
    func outage(_ duration: Duration) async throws {
        switch self {
        case .mock(let cluster, let count):
            for broker in 1...Int32(count) { try cluster.setBrokerDown(broker) }
            try await Task.sleep(for: duration)
            for broker in 1...Int32(count) { try cluster.setBrokerUp(broker) }
        case .tansu(let broker):
            try broker.dropConnections(for: duration)
            try await Task.sleep(for: duration)
        case .kfake(let broker):
            try broker.dropConnections(for: duration)
            try await Task.sleep(for: duration)
        }
    }

    func close() async {
        switch self {
        case .mock(let cluster, _): cluster.close()
        case .tansu(let broker): await broker.stop()
        case .kfake(let broker): await broker.stop()
        }
    }
}
