// End-to-end bridge benchmark (`make bench`): an embedded Kafka cluster pre-loaded with N events for the example
// example route, an APNs server in its own process, and the bridge in its own process (`pushbridge run` with a real
// configuration file and token auth), run until every outcome is read back. Then a live phase at a steady rate for
// the event-to-outcome latency, then h2load with the same headers and body against the same server over one
// connection. Prints notifications/s, latency, the bridge's peak RSS and CPU per notification, the server's and
// h2load's CPU per request, and the ratio to h2load.
//
// The server is nghttpd by default (nghttp2's C server: a few µs per request, so the pair measures the bridge), or
// `pushbridge simulator` with `--server simulator` (checks every request like APNs, at 60-99 µs per request).
//
//   make bench                                  # 200k events against nghttpd
//   make bench BENCH_ARGS="--server simulator"  # against the APNs simulator
//   make bench BENCH_EVENTS=1000000             # the 1M backlog (peak RSS target)
//   .build/release/BridgeBench --events 50000 --connections 4
//   .build/release/BridgeBench --events 50000 --log-sender

import APNSCore
import APNSSimulator
import BenchSupport
import Configuration
import Crypto
import Foundation
import Kafka
import Logging
import Routing
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

@main
struct BridgeBench {
    static let inputTopic = "orders.shipped"
    static let outcomesTopic = "bench.outcomes"
    static let keyID = "BENCHKEY01"
    static let teamID = "BENCHTEAM1"

    static func main() async {
        do {
            let options = try BenchOptions(arguments: CommandLine.arguments)
            try await Self.run(options)
        } catch {
            FileHandle.standardError.write(Data("BridgeBench: \(error)\n".utf8))
            exit(1)
        }
    }

    static func run(_ options: BenchOptions) async throws {
        var logger = Logger(label: "bench")
        logger.logLevel = .warning
        guard FileManager.default.isExecutableFile(atPath: options.pushbridgePath) else {
            throw BenchError("\(options.pushbridgePath) is missing: swift build -c release --product pushbridge")
        }
        let directory = options.directory
        let certificate = try SelfSignedCertificate.generate(in: directory)
        let signingKey = P256.Signing.PrivateKey()
        let keyPath = (directory as NSString).appendingPathComponent("AuthKey_\(Self.keyID).p8")
        try Data(signingKey.pemRepresentation.utf8).write(to: URL(fileURLWithPath: keyPath))

        // Kafka: the mock cluster keeps about 5 MiB per partition, so the input topic is sized for the whole run.
        let cluster = try KafkaMockCluster(brokerCount: 1, properties: ["log_level": "3"])
        defer { cluster.close() }
        let eventTotal = options.eventCount + options.liveEventCount
        let backlogPartitions = MockClusterSizing.partitionCount(
            records: eventTotal, bytesEach: MockClusterSizing.eventRecordBytes)
        // With urgent events, one more partition for them alone.
        let trickle = options.urgentEventCount > 0 ? UrgentTrickle(options: options, partition: backlogPartitions) : nil
        let inputPartitions = backlogPartitions + (trickle == nil ? 0 : 1)
        // With few device tokens (--ordering-keys), more partitions make it less likely that several tokens'
        // outcomes share one partition.
        let outcomePartitions =
            options.outcomePartitionCount > 0
            ? Int32(clamping: options.outcomePartitionCount)
            : max(BenchOptions.defaultOutcomePartitionCount, Int32(min(4 * options.orderingKeyCount, 256)))
        try cluster.createTopic(Self.inputTopic, partitionCount: inputPartitions)
        try cluster.createTopic(Self.outcomesTopic, partitionCount: outcomePartitions)
        try cluster.createTopic("bench.invalid-tokens", partitionCount: 1)
        try cluster.createTopic("bench.dead-letters", partitionCount: 1)

        // Two producers: the pre-load's batches are shaped like a production topic's (`preloadDefaults`); live
        // events go out at once (linger 5 ms), since their latency is measured from their produce.
        var preloadConfiguration = KafkaProducerConfiguration(bootstrapServers: cluster.bootstrapServers)
        preloadConfiguration.properties = BenchOptions.preloadDefaults.merging(["log_level": "3"]) { $1 }
        for (key, value) in options.preloadProperties { preloadConfiguration.properties[key] = value }
        let preloader = try KafkaProducer(configuration: preloadConfiguration, logger: logger).running()
        var producerConfiguration = KafkaProducerConfiguration(bootstrapServers: cluster.bootstrapServers)
        producerConfiguration.linger = .milliseconds(5)
        producerConfiguration.properties = ["log_level": "3"]
        let producer = try KafkaProducer(configuration: producerConfiguration, logger: logger).running()
        let events = EventFactory(activityCount: options.orderingKeyCount, tokenCount: options.deviceTokenCount)
        print(
            "BridgeBench: \(options.eventCount) events in \(inputPartitions) partitions of \(Self.inputTopic) "
                + "(\(events.sampleByteCount) bytes each, \(events.tokenCount) device tokens), "
                + "\(outcomePartitions) outcome partitions")
        if options.orderingKeyCount > 0 {
            print(
                "  \(options.orderingKeyCount) activities (one device token each), route "
                    + (options.ordersRoute
                        ? "with ordering_key: \"{{activity.id}}\"" : "without ordering_key (--unordered)"))
        }
        let preloadStarted = ContinuousClock.now
        // The last events go through the live producer: its first send to each partition waits for librdkafka to
        // set the partition up (up to a second), which would otherwise land on the first live events.
        let warmUp = min(options.eventCount / 10, 64 * Int(inputPartitions))
        // With urgent events the backlog goes round robin over its own partitions, leaving theirs empty.
        let spread = trickle.map { $0.partition }
        try await Self.preload(
            0..<(options.eventCount - warmUp), events: events, producer: preloader, partitions: spread)
        await preloader.close()
        try await Self.preload(
            (options.eventCount - warmUp)..<options.eventCount, events: events, producer: producer, partitions: spread)
        print("  pre-loaded in \(Self.seconds(ContinuousClock.now - preloadStarted)) s")

        // The APNs server, in its own process.
        let server = try await Self.startServer(
            options, certificate: certificate, keyPath: keyPath, tokens: events.deviceTokens(eventCount: eventTotal))
        defer { server.stop() }
        print("  APNs server: \(server.server.rawValue), pid \(server.pid): \(server.description)")
        // The round trip: the bridge and h2load reach the server through a relay that delays each direction.
        var apnsPort = server.port
        var relay: DelayProxy?
        if options.roundTripMilliseconds > 0 {
            let proxy = try await DelayProxy.start(
                targetPort: server.port, roundTrip: .milliseconds(options.roundTripMilliseconds))
            relay = proxy
            apnsPort = proxy.port
            print("  round trip: +\(options.roundTripMilliseconds) ms through a relay on 127.0.0.1:\(proxy.port)")
        }

        let configurationPath = (directory as NSString).appendingPathComponent("bench.yaml")
        try Self.configuration(
            options: options, bootstrapServers: cluster.bootstrapServers, serverPort: apnsPort,
            caFile: certificate.certificatePath, keyFile: keyPath, trickle: trickle
        ).write(toFile: configurationPath, atomically: true, encoding: .utf8)

        // Read the outcomes back while the bridge runs.
        let tally = OutcomeTally(urgentPartition: trickle?.partition)
        var readerConfiguration = KafkaConsumerConfiguration(
            bootstrapServers: cluster.bootstrapServers, groupID: "bench-reader-\(UUID())"
        )
        readerConfiguration.autoOffsetReset = .earliest
        readerConfiguration.properties = ["log_level": "3"]
        let reader = try KafkaConsumer(configuration: readerConfiguration, topics: [Self.outcomesTopic], logger: logger)
            .running()
        // The next offset the reader will read, per outcome partition: the mock cluster may drop what was read.
        let readThrough = Mutex([Int32: Int64]())
        let readerTask = Task {
            for try await batch in reader.batches {
                tally.add(batch.compactMap(\.value))
                readThrough.withLock { positions in
                    for message in batch { positions[message.partition] = message.offset + 1 }
                }
            }
        }

        // The bridge, in its own process: `pushbridge run` with the configuration file.
        let bridgeLog = (directory as NSString).appendingPathComponent("bridge.log")
        let bridgeStarted = ContinuousClock.now
        let bridge = try ChildProcess.spawn(
            options.pushbridgePath,
            ["run", "--config", configurationPath] + (options.logSender ? ["--log-sender"] : []),
            logFile: bridgeLog
        )
        print(
            "  bridge: pid \(bridge.pid), \(options.logSender ? "log sender (no APNs)" : "APNs sender"), "
                + "log \(bridgeLog)")

        // Backlog phase: every pre-loaded event becomes one outcome. Its CPU and rate are measured over a span in
        // the middle, placed by the outcomes' completion times (``SteadySpan``), from readings of the bridge's CPU
        // taken all along by a task of their own.
        var firstOutcomeSeen = false
        let span = SteadySpan(eventCount: options.eventCount, maxInFlight: options.maxInFlightCount)
        let (bridgePID, serverPID) = (bridge.pid, server.pid)
        let cpuTrace = Task { await SteadySpan.trace(bridgePID: bridgePID, serverPID: serverPID) }
        let backlogDeadline = ContinuousClock.now + .seconds(60) + .milliseconds(options.eventCount)
        var lastProgress = ContinuousClock.now
        var urgentDuringBacklog: Task<Void, any Error>?
        // The urgent events of the backlog phase count among its outcomes.
        while tally.count < options.eventCount + options.urgentEventCount {
            if let status = bridge.exitStatusIfExited() {
                throw BenchError("the bridge exited early with status \(status); see \(bridgeLog)")
            }
            guard ContinuousClock.now < backlogDeadline else {
                bridge.signal(SIGKILL)
                throw BenchError("timed out with \(tally.count)/\(options.eventCount) outcomes; see \(bridgeLog)")
            }
            if !firstOutcomeSeen, tally.count > 0 {
                firstOutcomeSeen = true
                if let trickle {
                    urgentDuringBacklog = Task {
                        try await trickle.produce(
                            0..<options.urgentEventCount, events: events, producer: producer, tally: tally)
                    }
                }
            }
            if ContinuousClock.now - lastProgress > .seconds(5) {
                lastProgress = ContinuousClock.now
                print("  ... \(tally.count) outcomes")
                if let dropped = await Self.droppedOutcomes(
                    reader: reader, partitionCount: outcomePartitions, readThrough: readThrough.withLock { $0 })
                {
                    bridge.signal(SIGKILL)
                    throw BenchError(
                        "the mock cluster dropped \(dropped.count) unread records of \(Self.outcomesTopic) "
                            + "partition \(dropped.partition) (it keeps about 5 MiB per partition), so those "
                            + "outcomes cannot be counted; the outcome keys (device tokens) must spread the records "
                            + "over more partitions (--outcome-partitions)")
                }
            }
            try await Task.sleep(for: .milliseconds(5))
        }
        let backlogRead = tally.lastReadAt ?? ContinuousClock.now
        let firstRead = tally.firstReadAt ?? bridgeStarted
        cpuTrace.cancel()
        guard let measured = span.measure(trace: await cpuTrace.value, completions: tally.completions) else {
            throw BenchError(
                "no two readings of the bridge's CPU fell between completions \(span.start) and \(span.end)")
        }
        let spanSeconds = measured.seconds
        let backlogCPU = measured.cpu
        try await urgentDuringBacklog?.value

        // Idle phase of the urgent events: as many again, on the bridge with the backlog done.
        if let trickle {
            try await trickle.produce(
                options.urgentEventCount..<(2 * options.urgentEventCount), events: events, producer: producer,
                tally: tally)
            let idleDeadline = ContinuousClock.now + .seconds(30)
            while tally.count < options.eventCount + 2 * options.urgentEventCount, ContinuousClock.now < idleDeadline {
                try await Task.sleep(for: .milliseconds(5))
            }
        }

        // Live phase: events at a steady rate, for the latency from the event's produce to its outcome.
        if options.liveEventCount > 0 {
            try await Self.produceLive(options, events: events, producer: producer, tally: tally)
            let liveDeadline = ContinuousClock.now + .seconds(30)
            while tally.count < eventTotal, ContinuousClock.now < liveDeadline {
                try await Task.sleep(for: .milliseconds(5))
            }
        }
        await producer.close()

        bridge.signal(SIGTERM)
        let (exitStatus, usage) = try await bridge.wait(timeout: .seconds(60))
        await reader.close()
        _ = await readerTask.result

        // h2load: the same request over one connection to the same server (the reference, whatever
        // --connections the bridge had).
        let h2loadCount = options.h2loadRequestCount > 0 ? options.h2loadRequestCount : min(options.eventCount, 200_000)
        let serverCPUBeforeH2Load = server.cpuSeconds
        let sampleRequest = try events.sampleRequest(configurationPath: configurationPath)
        let jwt = try ProviderTokenJWT.sign(
            keyID: Self.keyID, teamID: Self.teamID, issuedAtEpochSeconds: Int64(Date().timeIntervalSince1970),
            privateKey: signingKey
        ).compact
        let h2loadRuns = try (0..<options.h2loadRuns).map { _ in
            try H2LoadReference.run(
                request: sampleRequest, jwt: jwt, paths: events.deviceTokens(eventCount: h2loadCount), port: apnsPort,
                requestCount: h2loadCount, streams: options.serverStreamCount, directory: directory)
        }
        let h2load = H2LoadReference.median(of: h2loadRuns)
        await relay?.stop()
        let serverCPUDuringH2Load = (server.cpuSeconds - serverCPUBeforeH2Load) / Double(h2loadRuns.count)
        let serverCPUDuringBacklog = measured.serverCPU

        let rate = Double(measured.completed) / spanSeconds
        let latencies = tally.liveLatenciesMilliseconds.sorted()
        let connections = "\(options.connectionCount) APNs connection\(options.connectionCount == 1 ? "" : "s")"
        var report = "\nBridge end to end (server \(options.server.rawValue), "
        report += "\(options.logSender ? "log sender" : "APNs sender, token auth"), "
        report += "\(connections), max_in_flight \(options.maxInFlightCount)"
        if options.server == .simulator {
            report += ", simulator latency \(options.simulatorLatencyMilliseconds) ms"
        }
        report += ")\n"
        report += "  server:         \(server.description)\n"
        report += "  events:         \(options.eventCount) pre-loaded + \(options.liveEventCount) live -> "
        report += "\(tally.count) outcomes, \(tally.deliveredCount) delivered\n"
        report +=
            "  measured:       \(measured.completed) notifications completed in \(Self.format(spanSeconds, 2)) s, "
        report += "from completion \(span.start) to \(span.end) of the backlog (outcomes read from first to last in "
        report +=
            "\(Self.seconds(backlogRead - firstRead)) s; from bridge start: \(Self.seconds(backlogRead - bridgeStarted)) s)\n"
        report += span.caveat
        report += "  throughput:     \(Self.format(rate, 0)) notifications/s\n"
        report += "  CPU/notif:      \(Self.format(backlogCPU / Double(measured.completed) * 1e6, 1)) µs "
        report += "(bridge process; \(Self.format(backlogCPU, 2)) CPU s in "
        report += "\(Self.format(spanSeconds, 2)) s = \(Self.format(backlogCPU / spanSeconds, 2)) cores)\n"
        report += Self.threadReport(
            from: measured.start.threads, to: measured.end.threads, notifications: measured.completed)
        if latencies.isEmpty {
            report += "  latency:        no live phase\n"
        } else {
            report += "  latency:        p50 \(Self.format(Self.percentile(latencies, 0.50), 0)) ms, "
            report += "p99 \(Self.format(Self.percentile(latencies, 0.99), 0)) ms, "
            report += "max \(Self.format(latencies.last ?? 0, 0)) ms "
            report += "(event produce -> outcome completed_at, \(latencies.count) live events at "
            report += "\(options.liveRatePerSecond)/s)\n"
        }
        report += "  bridge process: peak RSS \(Self.format(usage.peakRSSMebibytes, 1)) MiB, "
        report += "\(Self.format(usage.cpuSeconds, 2)) CPU s in all, exit status \(exitStatus)\n"
        report += "  h2load -c 1 -m \(options.serverStreamCount) (reference, one connection): "
        report += "\(Self.format(h2load.rate, 0)) req/s "
        report += "(\(h2load.succeeded)/\(h2loadCount) 2xx), h2load's own CPU "
        report += "\(Self.format(h2load.cpuMicrosecondsPerRequest, 1)) µs/req"
        if h2loadRuns.count > 1 {
            let rates = h2loadRuns.map(\.rate)
            let cpus = h2loadRuns.map(\.cpuMicrosecondsPerRequest)
            report += " (medians of \(h2loadRuns.count) runs, which ranged over \(Self.format(rates.min() ?? 0, 0))–"
            report += "\(Self.format(rates.max() ?? 0, 0)) req/s, \(Self.format(cpus.min() ?? 0, 1))–"
            report += "\(Self.format(cpus.max() ?? 0, 1)) µs/req)"
        }
        report += "\n"
        let serverWithBridge = serverCPUDuringBacklog / Double(measured.completed) * 1e6
        let serverWithH2Load = serverCPUDuringH2Load / Double(h2loadCount) * 1e6
        report += "  server CPU/req: \(Self.format(serverWithBridge, 1)) µs with the bridge, "
        report += "\(Self.format(serverWithH2Load, 1)) µs with h2load (\(options.server.rawValue) process)\n"
        report += "  ratio bridge (\(connections)) / h2load (1 connection): "
        report += "\(Self.format(rate / h2load.rate, 2)) (target >= 0.5)\n"
        let bridgeMicroseconds = backlogCPU / Double(measured.completed) * 1e6
        report += "  CPU ratio:      bridge's CPU per notification / h2load's per request: "
        report += "\(Self.format(bridgeMicroseconds / h2load.cpuMicrosecondsPerRequest, 2)) (target <= 3)\n"
        if options.roundTripMilliseconds > 0 {
            // A connection has at most `streams` requests in flight, each for one round trip.
            let bound =
                Double(options.connectionCount * options.serverStreamCount) * 1000
                / Double(options.roundTripMilliseconds)
            report += "  round trip:     \(options.roundTripMilliseconds) ms, bound connections x streams / RTT = "
            report +=
                "\(options.connectionCount) x \(options.serverStreamCount) / \(options.roundTripMilliseconds) ms = "
            report += "\(Self.format(bound, 0))/s: bridge at \(Self.format(rate / bound * 100, 1))% of it, "
            report +=
                "h2load (1 connection) at \(Self.format(h2load.rate / (bound / Double(options.connectionCount)) * 100, 1))% "
            report += "of its own\n"
        }
        if let trickle {
            report += trickle.report(tally)
        }
        if options.streamLimitRaise > 0 {
            report += StreamRamp(
                completions: tally.completions, raisedLimit: options.streamLimitRaise * options.connectionCount,
                roundTripMilliseconds: options.simulatorLatencyMilliseconds
            ).report(raise: options.streamLimitRaise)
        }
        if tally.deliveredCount < tally.count {
            report += "  not delivered, e.g.: \(tally.otherStatusExamples.first ?? "")\n"
        }
        print(report)
        server.stop()
        if tally.count < options.eventCount + 2 * options.urgentEventCount || exitStatus != 0 {
            throw BenchError("the run was incomplete or the bridge exited with status \(exitStatus)")
        }
    }

    /// Starts the APNs server of `options.server`: nghttpd answering the device paths of `tokens`, or the simulator
    /// checking JWTs against the benchmark's key.
    static func startServer(
        _ options: BenchOptions, certificate: SelfSignedCertificate, keyPath: String, tokens: [String]
    ) async throws -> BenchServer {
        switch options.server {
        case .nghttpd:
            return try await BenchServer.nghttpd(
                tokens: tokens, streams: options.serverStreamCount,
                // At a round trip, a 64 KiB connection window would bound the rate before the streams do.
                connectionWindowBits: options.roundTripMilliseconds > 0 ? 24 : nil,
                certificatePath: certificate.certificatePath, keyPath: certificate.privateKeyPath,
                directory: options.directory)
        case .simulator:
            let scenarioPath = (options.directory as NSString).appendingPathComponent("scenario.yaml")
            var scenario = "latency_ms: \(options.simulatorLatencyMilliseconds)\n"
            if options.streamLimitRaise > 0 {
                // APNs allows one stream until a request succeeded; the schedule fires once a connection's
                // first request was answered (after the latency).
                scenario += """
                    connections:
                      max_concurrent_streams: 1
                      stream_limit_schedule: [{after_streams: 1, max_concurrent_streams: \(options.streamLimitRaise)}]

                    """
            }
            try scenario.write(toFile: scenarioPath, atomically: true, encoding: .utf8)
            return try BenchServer.simulator(
                pushbridge: options.pushbridgePath,
                arguments: [
                    "simulator", "--port", "0", "--tls-cert", certificate.certificatePath,
                    "--tls-key", certificate.privateKeyPath, "--jwt-key", "\(Self.keyID)=\(keyPath)",
                    "--scenario", scenarioPath,
                ]
            )
        }
    }

    /// The backlog's CPU per notification by thread name (threads of one name added up), most first, with the
    /// context switches: where the process total goes (docs/benchmarks.md, "Fourth session on the hot path").
    /// Threads that started during the backlog count from zero.
    static func threadReport(
        from start: [Int: ProcessCPU.ThreadUsage], to end: [Int: ProcessCPU.ThreadUsage], notifications: Int
    ) -> String {
        var byName: [String: (threads: Int, seconds: Double, voluntary: Int, involuntary: Int)] = [:]
        for (tid, usage) in end {
            let before = start[tid]
            var entry = byName[usage.name, default: (0, 0, 0, 0)]
            entry.threads += 1
            entry.seconds += usage.seconds - (before?.seconds ?? 0)
            entry.voluntary += usage.voluntarySwitches - (before?.voluntarySwitches ?? 0)
            entry.involuntary += usage.involuntarySwitches - (before?.involuntarySwitches ?? 0)
            byName[usage.name] = entry
        }
        let count = Double(max(1, notifications))
        var report = "  CPU by thread:  µs per notification (context switches per notification: waits, preemptions)\n"
        for (name, entry) in byName.sorted(by: { $0.value.seconds > $1.value.seconds }) where entry.seconds > 0 {
            let label = entry.threads > 1 ? "\(name) ×\(entry.threads)" : name
            report += "    \(label.padding(toLength: 22, withPad: " ", startingAt: 0)) "
            report += "\(Self.format(entry.seconds / count * 1e6, 2)) µs  "
            report +=
                "(\(Self.format(Double(entry.voluntary) / count, 3)), \(Self.format(Double(entry.involuntary) / count, 3)))\n"
        }
        return report
    }

    /// An outcome partition from which the mock cluster dropped records the reader had not read yet (its low
    /// watermark is past what was read), and how many: those outcomes can never be read, so waiting for them would
    /// only time out.
    static func droppedOutcomes(
        reader: KafkaConsumer, partitionCount: Int32, readThrough: [Int32: Int64]
    ) async -> (partition: Int32, count: Int64)? {
        for partition in 0..<partitionCount {
            let watermarks = try? await reader.queryWatermarks(
                for: KafkaPartition(topic: Self.outcomesTopic, partition: partition), timeout: .seconds(2))
            let read = readThrough[partition, default: 0]
            if let watermarks, watermarks.low > read { return (partition, watermarks.low - read) }
        }
        return nil
    }

    /// Produces events `indices`: by their keys' partitions, or round robin over the first `partitions`.
    static func preload(
        _ indices: Range<Int>, events: EventFactory, producer: KafkaProducer, partitions: Int32? = nil
    ) async throws {
        let chunk = 20_000
        for start in stride(from: indices.lowerBound, to: indices.upperBound, by: chunk) {
            try await withThrowingTaskGroup(of: Void.self) { group in
                for index in start..<min(indices.upperBound, start + chunk) {
                    let event = events.event(index)
                    let partition = partitions.map { Int32(index % Int($0)) }
                    group.addTask {
                        _ = try await producer.send(
                            topic: Self.inputTopic, key: event.key, value: event.value, partition: partition)
                    }
                }
                try await group.waitForAll()
            }
        }
    }

    static func produceLive(
        _ options: BenchOptions, events: EventFactory, producer: KafkaProducer, tally: OutcomeTally
    ) async throws {
        let perTick = max(1, options.liveRatePerSecond / 100)
        let started = ContinuousClock.now
        try await withThrowingTaskGroup(of: Void.self) { group in
            var index = 0
            var tick = 0
            while index < options.liveEventCount {
                for _ in 0..<min(perTick, options.liveEventCount - index) {
                    let event = events.event(options.eventCount + index)
                    index += 1
                    group.addTask {
                        let producedAt = Int64(Date().timeIntervalSince1970 * 1000)
                        let delivery = try await producer.send(
                            topic: Self.inputTopic, key: event.key, value: event.value)
                        if let offset = delivery.offset {
                            tally.recordLiveEvent(
                                partition: delivery.partition.partition, offset: offset,
                                producedAtEpochMilliseconds: producedAt)
                        }
                    }
                }
                tick += 1
                try await Task.sleep(until: started + .milliseconds(10 * tick), clock: .continuous)
            }
            try await group.waitForAll()
        }
    }

    static func configuration(
        options: BenchOptions, bootstrapServers: String, serverPort: Int, caFile: String, keyFile: String,
        trickle: UrgentTrickle? = nil
    ) -> String {
        """
        # Written by BridgeBench: the example route `order-shipped` (config/pushbridge.yaml) against \(options.server.rawValue), token auth.
        kafka:
          bootstrap_servers: "\(bootstrapServers)"
          group_id: pushbridge-bench
          client_id: pushbridge-bench
          commit_interval: 1s
          max_in_flight: \(options.maxInFlightCount)
          properties:
            log_level: "3"
        \(Self.propertiesBlock("consumer_properties", options.consumerProperties))\
        \(Self.propertiesBlock("producer_properties", options.producerProperties))apns:
          environment: sandbox
          endpoint: https://127.0.0.1:\(serverPort)
          ca_file: "\(caFile)"
          auth:
            type: token
            key_file: "\(keyFile)"
            key_id: \(Self.keyID)
            team_id: \(Self.teamID)
          connections: \(options.connectionCount)
          request_timeout: 10s
          retry:
            max_attempts: 5
            initial_backoff: 100ms
            max_backoff: 2s
        routes:
        \(EventFactory.route(inputTopic: Self.inputTopic, indent: 2, orderingKey: options.ordersRoute ? "{{activity.id}}" : nil))
        \(trickle.map { $0.configuration().route + "\n" } ?? "")outcomes:
          topic: \(Self.outcomesTopic)
          invalid_tokens_topic: bench.invalid-tokens
          dead_letter_topic: bench.dead-letters
        admin:
          listen: 127.0.0.1:0
        logging:
          level: warning
          format: text
        shutdown:
          drain_timeout: 30s
        \(trickle?.configuration().lanes ?? "")
        """
    }

    static func propertiesBlock(_ section: String, _ properties: [(String, String)]) -> String {
        guard !properties.isEmpty else { return "" }
        return "  \(section):\n" + properties.map { "    \($0.0): \"\($0.1)\"\n" }.joined()
    }

    static func percentile(_ sorted: [Double], _ fraction: Double) -> Double {
        sorted[min(sorted.count - 1, Int((Double(sorted.count) * fraction).rounded(.down)))]
    }

    static func secondsValue(_ duration: Duration) -> Double {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    }

    static func seconds(_ duration: Duration) -> String {
        Self.format(Self.secondsValue(duration), 2)
    }

    static func format(_ value: Double, _ decimals: Int) -> String {
        String(format: "%.\(decimals)f", value)
    }
}
