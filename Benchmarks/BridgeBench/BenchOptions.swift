import BenchSupport
import Foundation

/// The benchmark's command line: `BridgeBench [--events N] [--server nghttpd|simulator] ...`.
struct BenchOptions {
    /// The APNs server the bridge and h2load send to.
    enum Server: String {
        /// nghttp2's C server: answers 200 at once with a few µs of CPU and checks nothing (no JWT, no headers).
        /// Every event then carries one device token, whose path is an empty file in nghttpd's document root.
        /// The bridge's own cost dominates the pair.
        case nghttpd
        /// `pushbridge simulator`: checks every request like APNs (JWT, topic, token, headers); it spends more CPU
        /// per request than the bridge, so the ratio to h2load measures the simulator.
        case simulator
    }

    /// The APNs server (`--server`).
    var server = Server.nghttpd
    /// Events pre-loaded into the input topic before the bridge starts (one notification each).
    var eventCount = 200_000
    /// Events produced at a steady rate once the backlog is done, for the event-to-outcome latency.
    var liveEventCount = 10_000
    /// The live phase's rate, events per second.
    var liveRatePerSecond = 2_000
    /// Requests h2load sends (0: as many as the backlog, at most 200,000).
    var h2loadRequestCount = 0
    /// `--h2load-runs N`: how many times h2load runs; the ratios use the median run (0: 3, or 1 with `--rtt-ms`,
    /// where each run takes as long as the backlog). h2load's own CPU per request moved by a third between single
    /// runs on a shared host, and with it the CPU ratio.
    var h2loadRunCount = 0
    /// The h2load runs to make.
    var h2loadRuns: Int { self.h2loadRunCount > 0 ? self.h2loadRunCount : self.roundTripMilliseconds > 0 ? 1 : 3 }
    /// APNs connections the bridge keeps (`apns.connections`); h2load always uses one (the reference).
    var connectionCount = 1
    /// The simulator's delay before every answer (its scenario's `latency_ms`), to model APNs' round trip; only
    /// with `--server simulator`.
    var simulatorLatencyMilliseconds = 0
    /// `kafka.max_in_flight`.
    var maxInFlightCount = 10_000
    /// `--outcome-partitions N`: the outcome topic's partition count. 0 (the default) means
    /// ``defaultOutcomePartitionCount`` (more with `--ordering-keys`), whatever the event count. The mock cluster
    /// keeps about 5 MiB per partition and drops the oldest beyond, which works while the benchmark's reader keeps
    /// up; the run stops with an error when it does not.
    var outcomePartitionCount = 0
    /// A production-sized outcome topic, the same for every event count. Sizing it to keep every outcome of the
    /// run, as earlier sessions did, gave 1M events 217 partitions: batches of one or two records, so the bridge's
    /// producer and the mock's linear searches measured the topic's shape, not the bridge (docs/benchmarks.md,
    /// "Seventh session").
    static let defaultOutcomePartitionCount: Int32 = 48
    /// The pushbridge executable that runs the simulator and the bridge.
    var pushbridgePath = ".build/release/pushbridge"
    /// Where the key, certificate, configuration and logs are written.
    var directory = ".build/bench"
    /// librdkafka properties for the bridge's consumer (`kafka.consumer_properties`), from `--consumer-property K=V`.
    var consumerProperties: [(String, String)] = []
    /// librdkafka properties for the bridge's producer (`kafka.producer_properties`), from `--producer-property K=V`.
    var producerProperties: [(String, String)] = []
    /// librdkafka properties for the benchmark's own producer that pre-loads the input topic, from
    /// `--preload-property K=V`, applied over ``preloadDefaults``.
    var preloadProperties: [(String, String)] = []
    /// The pre-load's record batches: up to 16 KiB each (the Java producer's default `batch.size`, the commonest
    /// shape of a production topic), filled for up to 50 ms. librdkafka's mock cluster answers a fetch with one
    /// batch per partition and finds it by a linear search, so the few-record batches that a 5 ms linger made
    /// turned the pre-loaded topic into thousands of batches per partition and the benchmark process into the
    /// bottleneck at 1M events.
    static let preloadDefaults: [String: String] = ["linger.ms": "50", "batch.size": "16384"]
    /// Run the bridge with `--log-sender` (no APNs): the Kafka side's cost alone.
    var logSender = false
    /// `--ordering-keys N`: events carry `activity.id` cycling over N keys (each activity with its own device token)
    /// and the route has `ordering_key: "{{activity.id}}"`, so notifications of one activity go out one at a
    /// time. 0: the usual events and route.
    var orderingKeyCount = 0
    /// `--unordered`: with `--ordering-keys`, the same events through the route without `ordering_key`: the
    /// baseline for the cost of ordering.
    var unorderedRoute = false

    /// `--device-tokens N`: the distinct device tokens the events cycle over (nghttpd's document root holds one
    /// file each, h2load sends to the same paths). The default keeps nghttpd from being the reference's bottleneck.
    var deviceTokenCount = EventFactory.defaultTokenCount

    /// `--rtt-ms N`: the APNs round trip, added by a relay on 127.0.0.1 (``DelayProxy``) between the bridge (and
    /// h2load) and the server: N/2 ms each way. 0: none.
    var roundTripMilliseconds = 0
    /// `--server-streams N`: the concurrent streams nghttpd advertises (`-m`); the bound of a connection's requests
    /// in flight.
    var serverStreamCount = 100
    /// `--stream-limit-raise N`: the simulator advertises one concurrent stream on connect and N once a
    /// connection's first request was answered, as APNs does (one stream until a request with a valid provider
    /// token succeeded). The report says how soon the bridge had N requests in flight. 0: off. Simulator only.
    var streamLimitRaise = 0

    /// `--urgent-events N` (issue 32): N events of a second route, `order-urgent`, on a partition of their own,
    /// produced at `--urgent-rate` while the backlog drains, and N more once it is done (the idle bridge's
    /// latency); 0: none. The live phase is left out then.
    var urgentEventCount = 0
    /// `--urgent-rate N`: urgent events per second (default 50).
    var urgentRatePerSecond = 50
    /// `--lanes`: `order-urgent` in a lane of its own, `urgent` (`--urgent-max-in-flight`, default 500, and
    /// `expedite: true`); the backlog in the default lane, with what is left of `max_in_flight`.
    var lanes = false
    /// `--urgent-max-in-flight N`: the urgent lane's `max_in_flight`.
    var urgentMaxInFlight = 500

    /// Whether the route has `ordering_key`.
    var ordersRoute: Bool { self.orderingKeyCount > 0 && !self.unorderedRoute }

    static let usage = """
        usage: BridgeBench [--events N] [--server nghttpd|simulator] [--live-events N] [--live-rate N]
                           [--h2load-requests N] [--h2load-runs N] [--connections N] [--max-in-flight N] [--simulator-latency-ms N]
                           [--outcome-partitions N] [--pushbridge PATH] [--directory DIR] [--consumer-property K=V]... [--producer-property K=V]...
                           [--preload-property K=V]...
                           [--log-sender] [--ordering-keys N [--unordered]] [--device-tokens N]
                           [--rtt-ms N] [--server-streams N] [--stream-limit-raise N]
                           [--urgent-events N [--urgent-rate N] [--lanes [--urgent-max-in-flight N]]]
        """

    private static func property(_ argument: String, _ value: String) throws(BenchError) -> (String, String) {
        guard let equals = value.firstIndex(of: "=") else {
            throw BenchError("\(argument) needs K=V, got \(value)\n\(Self.usage)")
        }
        return (String(value[..<equals]), String(value[value.index(after: equals)...]))
    }

    init(arguments: [String]) throws(BenchError) {
        var iterator = arguments.dropFirst().makeIterator()
        while let argument = iterator.next() {
            if argument == "--log-sender" {
                self.logSender = true
                continue
            }
            if argument == "--unordered" {
                self.unorderedRoute = true
                continue
            }
            if argument == "--lanes" {
                self.lanes = true
                continue
            }
            guard let value = iterator.next() else {
                throw BenchError("\(argument) needs a value\n\(Self.usage)")
            }
            switch argument {
            case "--pushbridge": self.pushbridgePath = value
            case "--directory": self.directory = value
            case "--server":
                guard let server = Server(rawValue: value) else {
                    throw BenchError("--server is nghttpd or simulator, got \(value)\n\(Self.usage)")
                }
                self.server = server
            case "--consumer-property":
                self.consumerProperties.append(try Self.property(argument, value))
            case "--producer-property":
                self.producerProperties.append(try Self.property(argument, value))
            case "--preload-property":
                self.preloadProperties.append(try Self.property(argument, value))
            default:
                guard let number = Int(value), number >= 0 else {
                    throw BenchError("\(argument) needs a non-negative integer, got \(value)\n\(Self.usage)")
                }
                switch argument {
                case "--events": self.eventCount = max(1, number)
                case "--live-events": self.liveEventCount = number
                case "--live-rate": self.liveRatePerSecond = max(1, number)
                case "--h2load-requests": self.h2loadRequestCount = number
                case "--h2load-runs": self.h2loadRunCount = number
                case "--connections": self.connectionCount = max(1, number)
                case "--max-in-flight": self.maxInFlightCount = max(1, number)
                case "--simulator-latency-ms": self.simulatorLatencyMilliseconds = number
                case "--ordering-keys": self.orderingKeyCount = number
                case "--outcome-partitions": self.outcomePartitionCount = number
                case "--device-tokens": self.deviceTokenCount = number
                case "--rtt-ms":
                    guard number <= 60_000 else {
                        throw BenchError("--rtt-ms is at most 60000 (a minute), got \(value)")
                    }
                    self.roundTripMilliseconds = number
                case "--server-streams": self.serverStreamCount = max(1, number)
                case "--urgent-events": self.urgentEventCount = number
                case "--urgent-rate": self.urgentRatePerSecond = max(1, number)
                case "--urgent-max-in-flight": self.urgentMaxInFlight = max(1, number)
                case "--stream-limit-raise":
                    guard (1...100_000).contains(number) else {
                        throw BenchError("--stream-limit-raise is 1 to 100000, got \(value)")
                    }
                    self.streamLimitRaise = number
                default: throw BenchError("unknown option \(argument)\n\(Self.usage)")
                }
            }
        }
        if self.lanes, self.urgentEventCount == 0 {
            throw BenchError("--lanes needs --urgent-events N (the urgent lane's events)")
        }
        if self.urgentEventCount > 0 {
            // The live phase's events would land on any partition, the urgent one too.
            self.liveEventCount = 0
            guard self.urgentMaxInFlight < self.maxInFlightCount else {
                throw BenchError("--urgent-max-in-flight must leave the default lane room within --max-in-flight")
            }
        }
        if self.unorderedRoute, self.orderingKeyCount == 0 {
            throw BenchError("--unordered needs --ordering-keys N (the same events, without ordering_key)")
        }
        if self.orderingKeyCount > 0 {
            try self.checkOrderingKeys()
        }
        try self.checkDeviceTokens()
        if self.server == .nghttpd, self.simulatorLatencyMilliseconds > 0 {
            throw BenchError("--simulator-latency-ms needs --server simulator (nghttpd answers at once)")
        }
        if self.server == .nghttpd, self.streamLimitRaise > 0 {
            throw BenchError("--stream-limit-raise needs --server simulator (nghttpd's limit is fixed: -m)")
        }
    }
}

extension BenchOptions {
    /// The most events one device token may have: outcome records are keyed by the device token, so with
    /// `--ordering-keys N` they go to at most N outcome partitions, and librdkafka's mock cluster keeps only about
    /// 5 MiB of each (it drops the oldest beyond). Half of that, so that two tokens may share a partition.
    static var maximumEventsPerToken: Int {
        MockClusterSizing.retainedBytesPerPartition / 2 / MockClusterSizing.outcomeRecordBytes
    }

    /// `--device-tokens N` within what the tokens and the mock cluster allow.
    func checkDeviceTokens() throws(BenchError) {
        guard (1...EventFactory.distinctTokenCount).contains(self.deviceTokenCount) else {
            throw BenchError(
                "--device-tokens is 1 to \(EventFactory.distinctTokenCount), got \(self.deviceTokenCount)")
        }
        try self.checkOutcomesPerToken(option: "--device-tokens", tokens: self.deviceTokenCount)
    }

    /// `--ordering-keys N` within what the tokens and the mock cluster allow.
    func checkOrderingKeys() throws(BenchError) {
        guard self.orderingKeyCount <= EventFactory.distinctTokenCount else {
            throw BenchError(
                "--ordering-keys is at most \(EventFactory.distinctTokenCount), got \(self.orderingKeyCount)")
        }
        guard self.orderingKeyCount <= self.eventCount else {
            throw BenchError("--ordering-keys \(self.orderingKeyCount) is more than --events \(self.eventCount)")
        }
        try self.checkOutcomesPerToken(option: "--ordering-keys", tokens: self.orderingKeyCount)
    }

    /// The run's outcomes spread over `tokens` device tokens put at most ``maximumEventsPerToken`` on each.
    private func checkOutcomesPerToken(option: String, tokens: Int) throws(BenchError) {
        let total = self.eventCount + self.liveEventCount
        let perToken = (total + tokens - 1) / tokens
        guard perToken <= Self.maximumEventsPerToken else {
            throw BenchError(
                "\(option) \(tokens) puts \(perToken) outcomes on each device token (events plus live events); the "
                    + "mock cluster keeps about \(Self.maximumEventsPerToken) per outcome partition: use at most "
                    + "\(Self.maximumEventsPerToken * tokens) events in all, or more tokens")
        }
    }
}

/// Why the benchmark stopped.
struct BenchError: Error, CustomStringConvertible {
    var description: String

    init(_ description: String) {
        self.description = description
    }
}
