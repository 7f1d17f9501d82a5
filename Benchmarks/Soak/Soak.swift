// The churn soak (`make soak`, issue 28): events at a steady rate into a consumer group of `pushbridge run` child
// processes (release build, real configuration files, token auth) sending to `pushbridge simulator` (GOAWAY every
// 500 streams, 2% 503s), while instances join, one is SIGKILLed, every broker goes away for a while and two leave
// with SIGTERM; then it waits for the group's commits to reach the end offsets and reports, from the result topics
// and the instances' own JSON logs, how long partitions had no owner and delivery stopped at each change, the
// duplicate outcomes by cause, how long the commits took, each instance's peak RSS, and the accounting.
//
//   make soak                                      # the mock cluster, then Tansu
//   make soak SOAK_BROKER=mock SOAK_ARGS="--consumer-property partition.assignment.strategy=cooperative-sticky"
//   .build/release/Soak --broker tansu --duration 120 --rate 50

import APNSSimulator
import BenchSupport
import Bridge
import Crypto
import Foundation
import Kafka
import Logging
import Synchronization
import TestSupport

#if canImport(Glibc)
    import Glibc
#endif

@main
struct Soak {
    static let keyID = "SOAKKEY001"
    /// The soak's own clients reconnect as the bridge's do (its default `reconnect.backoff.max.ms`). With
    /// librdkafka's 10 s, the soak's producer came back up to 10 s after an outage ended, later than the instances,
    /// and the report counted that wait as the bridge's delivery stop.
    static let reconnectBackoffMaxMilliseconds = BridgeRuntime.consumerDefaults["reconnect.backoff.max.ms"] ?? "2000"
    static let teamID = "SOAKTEAM01"

    static func main() async {
        do {
            let options = try SoakOptions(arguments: CommandLine.arguments)
            let passed = try await SoakRun(options: options).run()
            exit(passed ? 0 : 1)
        } catch {
            FileHandle.standardError.write(Data("Soak: \(error)\n".utf8))
            exit(1)
        }
    }
}

/// Prints a line at once (`print` holds its output in a buffer while standard output is a file or a pipe).
func say(_ text: String) {
    FileHandle.standardOutput.write(Data((text + "\n").utf8))
}

/// Wall-clock time in seconds since the epoch: the bridge's logs and outcome records use the same clock.
func wallClock() -> Double { Date().timeIntervalSince1970 }

/// One `pushbridge run` of the soak.
final class SoakInstance: Sendable {
    /// 1, 2, 3, …: the order of starting.
    let number: Int
    let process: ChildProcess
    let logPath: String
    let startedAt: Double

    struct State {
        var peakRSSMebibytes: Double = 0
        /// SIGKILL or SIGTERM, and when the soak sent it.
        var signal: Int32?
        var signalledAt: Double?
        var exitStatus: Int32?
        var exitedAt: Double?
    }

    let state = Mutex(State())

    init(number: Int, process: ChildProcess, logPath: String, startedAt: Double) {
        self.number = number
        self.process = process
        self.logPath = logPath
        self.startedAt = startedAt
    }

    var isRunning: Bool { self.state.withLock { $0.exitStatus == nil } }

    /// Reads VmHWM while the process lives.
    func sampleRSS() {
        guard self.isRunning, let rss = self.process.peakRSSMebibytesSoFar() else { return }
        self.state.withLock { $0.peakRSSMebibytesSoFar(rss) }
    }

    /// SIGKILL, after a last look at its peak RSS; reaps it.
    func kill() async {
        self.sampleRSS()
        self.state.withLock {
            $0.signal = SIGKILL
            $0.signalledAt = wallClock()
        }
        self.process.signal(SIGKILL)
        await self.waitForExit(timeout: .seconds(10))
    }

    /// SIGTERM, then waits for the exit (the drain takes up to `shutdown.drain_timeout` + 10 s).
    func terminate() async {
        self.state.withLock {
            $0.signal = SIGTERM
            $0.signalledAt = wallClock()
        }
        self.process.signal(SIGTERM)
        await self.waitForExit(timeout: .seconds(90))
    }

    private func waitForExit(timeout: Duration) async {
        do {
            let (status, usage) = try await self.process.wait(timeout: timeout)
            self.state.withLock {
                $0.exitStatus = status
                $0.exitedAt = wallClock()
                $0.peakRSSMebibytesSoFar(usage.peakRSSMebibytes)
            }
        } catch {
            // wait(timeout:) sent SIGKILL when the time ran out.
            self.state.withLock {
                $0.exitStatus = -1
                $0.exitedAt = wallClock()
            }
        }
    }
}

extension SoakInstance.State {
    mutating func peakRSSMebibytesSoFar(_ rss: Double) {
        self.peakRSSMebibytes = max(self.peakRSSMebibytes, rss)
    }
}

/// A point of the schedule as it happened.
struct SoakChange: Sendable {
    enum Kind: Sendable {
        case start([Int])
        case kill(Int)
        case terminate(Int)
        case outage(Int)
        case finalTerminate([Int])
    }

    var time: Double
    var kind: Kind

    var label: String {
        switch self.kind {
        case .start(let numbers):
            numbers.count > 1
                ? numbers.map { "#\($0)" }.joined(separator: ", ") + " start" : "#\(numbers[0]) joins"
        case .kill(let number): "#\(number) SIGKILL"
        case .terminate(let number): "#\(number) SIGTERM"
        case .outage(let seconds): "brokers down \(seconds) s"
        case .finalTerminate(let numbers): numbers.map { "#\($0)" }.joined(separator: ", ") + " SIGTERM (end)"
        }
    }
}

struct SoakRun {
    let options: SoakOptions

    /// Runs the soak; returns whether every event was accounted for.
    func run() async throws -> Bool {
        let options = self.options
        guard FileManager.default.isExecutableFile(atPath: options.pushbridgePath) else {
            throw SoakError("\(options.pushbridgePath) is missing: swift build -c release --product pushbridge")
        }
        let name = options.name ?? Self.defaultName(options)
        let directory = (options.directory as NSString).appendingPathComponent(name)
        try? FileManager.default.removeItem(atPath: directory)
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        func path(_ file: String) -> String { (directory as NSString).appendingPathComponent(file) }
        let mockDebugLog = options.mockDebug && options.broker == .mock ? path("mock-debug.log") : nil
        if let mockDebugLog {
            // librdkafka's default logger writes to file descriptor 2.
            let descriptor = open(mockDebugLog, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
            guard descriptor >= 0, dup2(descriptor, 2) == 2 else { throw SoakError("cannot write \(mockDebugLog)") }
            close(descriptor)
        }
        var logger = Logger(label: "soak")
        logger.logLevel = .critical

        // APNs: the simulator in its own process, trusting a fresh provider key.
        let certificate = try SelfSignedCertificate.generate(in: directory)
        let keyPath = path("AuthKey_\(Soak.keyID).p8")
        try Data(P256.Signing.PrivateKey().pemRepresentation.utf8).write(to: URL(fileURLWithPath: keyPath))
        let scenarioPath = path("scenario.yaml")
        try """
        # make soak: APNs closes every connection after 500 streams and answers 2% of the requests 503.
        connections:
          goaway_after_streams: \(options.goawayAfterStreams)
        faults:
          rate_503: \(options.rate503)

        """.write(toFile: scenarioPath, atomically: true, encoding: .utf8)
        let simulatorLog = path("simulator.log")
        let simulator = try ChildProcess.spawn(
            options.pushbridgePath,
            [
                "simulator", "--port", "0", "--tls-cert", certificate.certificatePath, "--tls-key",
                certificate.privateKeyPath, "--jwt-key", "\(Soak.keyID)=\(keyPath)", "--scenario", scenarioPath,
            ],
            logFile: simulatorLog)
        var simulatorStopped = false
        defer { if !simulatorStopped { simulator.signal(SIGKILL) } }
        let simulatorPort = try await Self.announcedPort(
            log: simulatorLog, prefix: "APNs simulator listening on ", process: simulator)

        // Kafka.
        say("Soak: \(options.broker.rawValue), starting the broker")
        let cluster = try await SoakCluster.start(options)
        let partitionCount = Int32(options.partitionCount)
        try await cluster.broker.addTopic(SoakTopics.input, partitions: partitionCount)
        try await cluster.broker.addTopic(SoakTopics.outcomes, partitions: SoakTopics.outcomePartitionCount)
        try await cluster.broker.addTopic(SoakTopics.invalidTokens, partitions: 1)
        try await cluster.broker.addTopic(SoakTopics.deadLetters, partitions: 1)
        let group = "pushbridge-soak-\(UUID().uuidString.prefix(8))"

        // The reader: every partition of the input and result topics, from the start, without joining a group.
        let records = SoakRecords()
        var partitions = (0..<partitionCount).map { KafkaPartition(topic: SoakTopics.input, partition: $0) }
        partitions += (0..<SoakTopics.outcomePartitionCount).map {
            KafkaPartition(topic: SoakTopics.outcomes, partition: $0)
        }
        partitions += [SoakTopics.invalidTokens, SoakTopics.deadLetters].map { KafkaPartition(topic: $0, partition: 0) }
        var readerConfiguration = consumerConfiguration(cluster.broker, group: "soak-reader-\(UUID())")
        readerConfiguration.maxBatchMessageCount = 1000
        readerConfiguration.properties["log_level"] = "0"
        readerConfiguration.properties["reconnect.backoff.max.ms"] = Soak.reconnectBackoffMaxMilliseconds
        let reader = try KafkaConsumer(configuration: readerConfiguration, readingFromStart: partitions, logger: logger)
            .running()
        let readerTask = Task {
            for try await batch in reader.batches { records.add(batch) }
        }
        // Asks for the bridge group's committed offsets without joining it.
        var committedConfiguration = consumerConfiguration(cluster.broker, group: group)
        committedConfiguration.properties["log_level"] = "0"
        let committedReader = try KafkaConsumer(
            configuration: committedConfiguration, readingFromStart: [], logger: logger
        ).running()

        let configuration = SoakConfiguration(
            options: options, bootstrapServers: cluster.broker.bootstrapServers, group: group,
            simulatorPort: simulatorPort, caFile: certificate.certificatePath, keyFile: keyPath)
        let instances = SoakInstances()
        // Whatever fails, no instance outlives the soak.
        defer {
            for instance in instances.withLock({ $0 }) where instance.isRunning { instance.process.signal(SIGKILL) }
        }
        // The run. Times scale with the duration: 36 s of 240 is 0.15, and so on.
        let runStart = wallClock()
        let startInstant = ContinuousClock.now
        func startInstance() throws -> Int {
            let number = instances.withLock { $0.count } + 1
            let configPath = path("pushbridge-\(number).yaml")
            try configuration.yaml(instance: number).write(toFile: configPath, atomically: true, encoding: .utf8)
            let logPath = path("instance-\(number).log")
            let process = try ChildProcess.spawn(
                options.pushbridgePath, ["run", "--config", configPath], logFile: logPath)
            let instance = SoakInstance(number: number, process: process, logPath: logPath, startedAt: wallClock())
            instances.withLock { $0.append(instance) }
            say("  \(Self.clock(wallClock() - runStart)) #\(number) started (pid \(process.pid), log \(logPath))")
            return number
        }
        func instance(_ number: Int) -> SoakInstance { instances.withLock { $0[number - 1] } }

        // Peak RSS of every living instance, every second.
        let sampler = Task {
            while !Task.isCancelled {
                for instance in instances.withLock({ $0 }) { instance.sampleRSS() }
                try? await Task.sleep(for: .seconds(1))
            }
        }

        let duration = Duration.seconds(options.durationSeconds)
        func at(_ fraction: Double) -> ContinuousClock.Instant { startInstant + duration * fraction }
        var changes: [SoakChange] = []
        let eventCount = options.ratePerSecond * options.durationSeconds
        let producedAt = ProducedTimes(count: eventCount)
        let acknowledgedAt = ProducedTimes(count: eventCount)
        say(
            "Soak: \(eventCount) events at \(options.ratePerSecond)/s for \(options.durationSeconds) s into "
                + "\(partitionCount) partitions; \(cluster.description); group \(group); directory \(directory)")
        let producerTask = Task {
            try await Self.produce(
                count: eventCount, rate: options.ratePerSecond, partitions: partitionCount, start: startInstant,
                broker: cluster.broker, producedAt: producedAt, acknowledgedAt: acknowledgedAt, logger: logger)
        }
        let first = try startInstance()
        let second = try startInstance()
        changes.append(SoakChange(time: wallClock(), kind: .start([first, second])))
        var background: [Task<Void, Never>] = []
        try await Task.sleep(until: at(0.15), clock: .continuous)
        let third = try startInstance()
        changes.append(SoakChange(time: wallClock(), kind: .start([third])))
        try await Task.sleep(until: at(0.30), clock: .continuous)
        changes.append(SoakChange(time: wallClock(), kind: .kill(1)))
        say("  \(Self.clock(wallClock() - runStart)) #1 SIGKILL")
        await instance(1).kill()
        try await Task.sleep(until: at(0.45), clock: .continuous)
        changes.append(SoakChange(time: wallClock(), kind: .outage(options.outageSeconds)))
        say("  \(Self.clock(wallClock() - runStart)) every broker down for \(options.outageSeconds) s")
        try await cluster.outage(.seconds(options.outageSeconds))
        try await Task.sleep(until: at(0.55), clock: .continuous)
        let fourth = try startInstance()
        changes.append(SoakChange(time: wallClock(), kind: .start([fourth])))
        for (fraction, number) in [(0.70, 2), (0.80, 3)] {
            try await Task.sleep(until: at(fraction), clock: .continuous)
            changes.append(SoakChange(time: wallClock(), kind: .terminate(number)))
            say("  \(Self.clock(wallClock() - runStart)) #\(number) SIGTERM")
            let leaving = instance(number)
            background.append(Task { await leaving.terminate() })
        }
        let produced = try await producerTask.value
        // When the last event was handed to the producer (its acknowledgement came a few milliseconds later).
        let lastEventAt = producedAt.times.filter { !$0.isNaN }.max() ?? wallClock()
        say("  \(Self.clock(lastEventAt - runStart)) events stop (\(produced) produced)")

        // Settle: every produced event read back from the input topic gives the end offsets; then wait for the
        // group's commits to reach them (bounded), and for the outcomes.
        let settleDeadline = ContinuousClock.now + .seconds(options.settleSeconds)
        while records.state.withLock({ $0.inputCount }) < produced, ContinuousClock.now < settleDeadline {
            try await Task.sleep(for: .milliseconds(200))
        }
        let ends = records.state.withLock { $0.inputEnds }
        var committed: [Int32: Int64] = [:]
        var commitsReachedAt: Double?
        while ContinuousClock.now < settleDeadline {
            if let offsets = try? await committedReader.committedOffsets(
                for: (0..<partitionCount).map { KafkaPartition(topic: SoakTopics.input, partition: $0) },
                timeout: .seconds(5))
            {
                committed = Dictionary(uniqueKeysWithValues: offsets.map { ($0.key.partition, $0.value) })
            }
            if (0..<partitionCount).allSatisfy({ committed[$0, default: 0] >= ends[$0, default: 0] }) {
                commitsReachedAt = wallClock()
                break
            }
            try await Task.sleep(for: .seconds(1))
        }
        if let commitsReachedAt {
            let after = Self.clock(commitsReachedAt - lastEventAt)
            say(
                "  \(Self.clock(commitsReachedAt - runStart)) commits at the end offsets, \(after) after the last event"
            )
        } else {
            say(
                "  \(Self.clock(wallClock() - runStart)) commits not at the end offsets "
                    + "after \(options.settleSeconds) s"
            )
        }
        let outcomeDeadline = ContinuousClock.now + .seconds(30)
        while ContinuousClock.now < outcomeDeadline {
            let seen = records.state.withLock { state in
                Set(state.outcomes.map(\.eventIndex)).count + state.deadLetters.count
            }
            if seen >= produced { break }
            try await Task.sleep(for: .milliseconds(500))
        }

        // The rest leave with SIGTERM.
        let remaining = instances.withLock { $0 }.filter(\.isRunning).filter { instance in
            instance.state.withLock { $0.signal == nil }
        }
        changes.append(SoakChange(time: wallClock(), kind: .finalTerminate(remaining.map(\.number))))
        say("  \(Self.clock(wallClock() - runStart)) \(changes.last?.label ?? "")")
        await withTaskGroup(of: Void.self) { group in
            for instance in remaining { group.addTask { await instance.terminate() } }
        }
        for task in background { await task.value }
        sampler.cancel()
        var finalCommitted = committed
        if let offsets = try? await committedReader.committedOffsets(
            for: (0..<partitionCount).map { KafkaPartition(topic: SoakTopics.input, partition: $0) },
            timeout: .seconds(10))
        {
            finalCommitted = Dictionary(uniqueKeysWithValues: offsets.map { ($0.key.partition, $0.value) })
        }
        try await Task.sleep(for: .seconds(3))
        await committedReader.close()
        await reader.close()
        _ = await readerTask.result
        simulator.signal(SIGTERM)
        _ = try? await simulator.wait(timeout: .seconds(20))
        simulatorStopped = true
        await cluster.close()

        let analysis = SoakAnalysis(
            options: options, clusterDescription: cluster.description, group: group, runStart: runStart,
            lastEventAt: lastEventAt, changes: changes, instances: instances.withLock { $0 },
            records: records.state.withLock { $0 }, producedAt: producedAt.times,
            acknowledgedAt: acknowledgedAt.times, produced: produced, ends: ends,
            committed: finalCommitted, commitsReachedAt: commitsReachedAt,
            simulatorSummary: (try? String(contentsOfFile: simulatorLog, encoding: .utf8)) ?? "",
            mockDebugLog: mockDebugLog)
        let (report, boundsHeld) = analysis.report()
        say(report)
        let reportPath = path("report.txt")
        try report.write(toFile: reportPath, atomically: true, encoding: .utf8)
        try? FileManager.default.removeItem(atPath: (options.directory as NSString).appendingPathComponent("latest"))
        try? FileManager.default.createSymbolicLink(
            atPath: (options.directory as NSString).appendingPathComponent("latest"), withDestinationPath: name)
        say("report: \(reportPath)")
        return analysis.accounted && boundsHeld
    }

    /// Produces event `i` (``EventFactory``) at `start + i / rate` to partition `i % partitions`; returns how many
    /// were acknowledged.
    static func produce(
        count: Int, rate: Int, partitions: Int32, start: ContinuousClock.Instant, broker: any TestKafkaBroker,
        producedAt: ProducedTimes, acknowledgedAt: ProducedTimes, logger: Logger
    ) async throws -> Int {
        var configuration = producerConfiguration(broker)
        configuration.linger = .milliseconds(5)
        configuration.properties["reconnect.backoff.max.ms"] = Soak.reconnectBackoffMaxMilliseconds
        let producer = try KafkaProducer(configuration: configuration, logger: logger).running()
        let events = EventFactory()
        let acknowledged = try await withThrowingTaskGroup(of: Bool.self) { group in
            for index in 0..<count {
                try await Task.sleep(
                    until: start + .seconds(1) * (Double(index) / Double(rate)), clock: .continuous)
                let event = events.event(index)
                producedAt.set(index, wallClock())
                group.addTask {
                    do {
                        try await producer.send(
                            topic: SoakTopics.input, key: event.key, value: event.value,
                            partition: Int32(index % Int(partitions)))
                        acknowledgedAt.set(index, wallClock())
                        return true
                    } catch {
                        producedAt.set(index, .nan)
                        return false
                    }
                }
            }
            var acknowledged = 0
            for try await sent in group where sent { acknowledged += 1 }
            return acknowledged
        }
        await producer.close()
        return acknowledged
    }

    /// The port of the `prefix` line a child writes to its log (`… listening on 127.0.0.1:PORT …`), within 30 s.
    static func announcedPort(log: String, prefix: String, process: ChildProcess) async throws -> Int {
        let deadline = ContinuousClock.now + .seconds(30)
        while ContinuousClock.now < deadline {
            let text = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
            if let line = text.split(separator: "\n").first(where: { $0.hasPrefix(prefix) }),
                let port = line.dropFirst(prefix.count).prefix(while: { $0 != " " }).split(separator: ":").last
                    .flatMap({ Int($0) })
            {
                return port
            }
            if let status = process.exitStatusIfExited() {
                throw SoakError("\(process.name) exited with status \(status): \(text)")
            }
            try await Task.sleep(for: .milliseconds(50))
        }
        throw SoakError("\(process.name) did not print \(prefix) within 30 s; see \(log)")
    }

    static func defaultName(_ options: SoakOptions) -> String {
        let formatter = DateFormatter()
        formatter.dateFormat = "yyyyMMdd-HHmmss"
        formatter.timeZone = TimeZone(identifier: "UTC")
        let properties = options.consumerProperties.map { "\($0.0)=\($0.1)" }.joined(separator: ",")
        var name = "\(formatter.string(from: Date()))-\(options.broker.rawValue)"
        if !properties.isEmpty {
            name += "-" + String(properties.map { $0.isLetter || $0.isNumber || $0 == "=" ? $0 : "_" })
        }
        return name
    }

    static func clock(_ seconds: Double) -> String { String(format: "%6.1f s", seconds) }
}

/// The instances, in the order they started.
final class SoakInstances: Sendable {
    private let list = Mutex([SoakInstance]())

    func withLock<Result: Sendable>(_ body: (inout [SoakInstance]) -> Result) -> Result {
        self.list.withLock { body(&$0) }
    }
}

/// A time per event (seconds since the epoch; NaN: none): when it was handed to the producer, or acknowledged.
final class ProducedTimes: Sendable {
    private let storage: Mutex<[Double]>

    init(count: Int) {
        self.storage = Mutex([Double](repeating: .nan, count: count))
    }

    func set(_ index: Int, _ time: Double) {
        self.storage.withLock { $0[index] = time }
    }

    var times: [Double] { self.storage.withLock { $0 } }
}
