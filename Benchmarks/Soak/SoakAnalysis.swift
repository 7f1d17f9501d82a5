import Bridge
import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// What a soak run measured, worked out from what the reader saw on the topics and the instances' own logs.
struct SoakAnalysis {
    var options: SoakOptions
    var clusterDescription: String
    var group: String
    var runStart: Double
    var lastEventAt: Double
    var changes: [SoakChange]
    var instances: [SoakInstance]
    var records: SoakRecords.State
    var producedAt: [Double]
    /// When Kafka acknowledged each event to the soak's own producer (NaN when it failed).
    var acknowledgedAt: [Double]
    var produced: Int
    var ends: [Int32: Int64]
    var committed: [Int32: Int64]
    var commitsReachedAt: Double?
    var simulatorSummary: String
    /// The mock cluster's debug log (`--mock-debug`), if any.
    var mockDebugLog: String?

    /// Every produced event has an outcome or a dead letter.
    var accounted: Bool { self.missing.isEmpty }

    /// Produced events with neither an outcome nor a dead letter.
    var missing: [Int] {
        let seen = Set(self.records.outcomes.map(\.eventIndex)).union(self.records.deadLetters.keys)
        return self.producedAt.indices.filter { !self.producedAt[$0].isNaN && !seen.contains($0) }
    }

    var partitions: Range<Int32> { 0..<Int32(self.options.partitionCount) }

    /// The session timeout the instances ran with (PushBridge's default unless a property set it), in seconds.
    var sessionTimeoutSeconds: Double {
        let setting =
            self.options.consumerProperty("session.timeout.ms")
            ?? BridgeRuntime.consumerDefaults["session.timeout.ms"]
        return (setting.flatMap(Double.init) ?? 45_000) / 1000
    }

    // MARK: Ownership

    /// Every hold of every partition by every instance, from their logs.
    var holds: [Ownership] {
        self.instances.flatMap { instance in
            let state = instance.state.withLock { $0 }
            return Ownership.holds(
                instance: instance.number, lines: LogLine.read(path: instance.logPath),
                killedAt: state.signal == SIGKILL ? state.signalledAt : nil, exitedAt: state.exitedAt)
        }
    }

    /// Stretches of time in which no living instance held `partition`, from the start of the run to the last exit.
    static func unowned(_ holds: [Ownership], from start: Double, to end: Double) -> [(from: Double, to: Double)] {
        let pieces = holds.map { ($0.start, $0.end ?? end) }.sorted { $0.0 < $1.0 }
        var stretches: [(from: Double, to: Double)] = []
        var covered = start
        for (from, to) in pieces {
            if from > covered { stretches.append((covered, from)) }
            covered = max(covered, to)
        }
        if covered < end { stretches.append((covered, end)) }
        return stretches
    }

    /// Gaps between consecutive times (sorted), with the run's start as the first time.
    static func gaps(_ times: [Double], from start: Double) -> [(from: Double, to: Double)] {
        var previous = start
        var result: [(from: Double, to: Double)] = []
        for time in times.sorted() {
            result.append((previous, time))
            previous = max(previous, time)
        }
        return result
    }

    // MARK: The report

    /// The report, and whether the ownership bounds held (always, on a broker where they are not checked).
    func report() -> (text: String, boundsHeld: Bool) {
        let holds = self.holds
        let runEnd = self.instances.compactMap { $0.state.withLock { $0.exitedAt } }.max() ?? wallClock()
        var text = self.header()

        // Per change: no owner, delivery stopped, latency.
        let byPartition = Dictionary(grouping: holds, by: \.partition)
        let unowned = Dictionary(
            uniqueKeysWithValues: self.partitions.map {
                ($0, Self.unowned(byPartition[$0] ?? [], from: self.runStart, to: runEnd))
            })
        let groupUnowned = Self.groupUnowned(holds, from: self.runStart, to: runEnd)
        let firstOutcome = Dictionary(grouping: self.records.outcomes, by: \.eventIndex).mapValues {
            $0.map(\.completedAt).min() ?? 0
        }
        let completions = Dictionary(grouping: self.records.outcomes, by: \.partition).mapValues {
            $0.map(\.completedAt)
        }
        let partitionGaps = Dictionary(
            uniqueKeysWithValues: self.partitions.map {
                ($0, Self.gaps(completions[$0] ?? [], from: self.runStart))
            })
        let groupGaps = Self.gaps(self.records.outcomes.map(\.completedAt), from: self.runStart)

        text += "\nMembership changes (s from the start). Each row: what began between this change and the next.\n"
        text += "  no owner: no living instance had the partition assigned (their own log lines);\n"
        text += "  whole group: no partition assigned anywhere; delivery stopped: the longest gap between\n"
        text += "  outcomes (completed_at) on one partition and over all; latency: event produced -> its first\n"
        text += "  outcome completed, for events produced in the row's time; event ack: the longest the soak's\n"
        text += "  own producer waited for Kafka's acknowledgement of those events (the test's share of the latency).\n"
        text += "  at       change                   no owner: partitions  longest  median | whole group"
        text += " | delivery stopped: longest partition | group | latency max | event ack\n"
        let unownedByChange = self.unownedByChange(unowned, runEnd: runEnd)
        for (position, change) in self.changes.enumerated() {
            let windowEnd = position + 1 < self.changes.count ? self.changes[position + 1].time : runEnd
            let inWindow = Self.window(of: change, to: windowEnd)
            let longest = unownedByChange[position]
            let groupLongest = groupUnowned.filter(inWindow).map { $0.to - $0.from }.max()
            let deliveryEnd = min(windowEnd, self.lastEventAt)
            let deliveryWindow: ((from: Double, to: Double)) -> Bool = { gap in
                gap.from >= change.time - 1 && gap.from < deliveryEnd
            }
            var partitionStop: Double?
            if change.time < self.lastEventAt {
                for partition in self.partitions {
                    let gap = (partitionGaps[partition] ?? []).filter(deliveryWindow).map { $0.to - $0.from }.max()
                    if let gap { partitionStop = max(partitionStop ?? 0, gap) }
                }
            }
            let groupStop =
                change.time < self.lastEventAt
                ? groupGaps.filter(deliveryWindow).map { $0.to - $0.from }.max() : nil
            let latencies = self.producedAt.indices.compactMap { index -> Double? in
                let produced = self.producedAt[index]
                guard !produced.isNaN, produced >= change.time, produced < windowEnd, let done = firstOutcome[index]
                else { return nil }
                return done - produced
            }
            let acknowledgementWaits = self.producedAt.indices.compactMap { index -> Double? in
                let produced = self.producedAt[index]
                let acknowledged = self.acknowledgedAt[index]
                guard !produced.isNaN, !acknowledged.isNaN, produced >= change.time, produced < windowEnd else {
                    return nil
                }
                return acknowledged - produced
            }
            text += "  " + Self.pad(Self.format(change.time - self.runStart, 1), 7)
            text += "  " + Self.pad(change.label, 24, left: true)
            text += " " + Self.pad("\(longest.count)", 20)
            text += " " + Self.pad(Self.seconds(longest.last), 8)
            text += " " + Self.pad(Self.seconds(longest.isEmpty ? nil : longest[longest.count / 2]), 7)
            text += " | " + Self.pad(Self.seconds(groupLongest), 11)
            text += " | " + Self.pad(Self.seconds(partitionStop), 35)
            text += " | " + Self.pad(Self.seconds(groupStop), 5)
            text += " | " + Self.pad(Self.seconds(latencies.max()), 11)
            text += " | " + Self.pad(Self.seconds(acknowledgementWaits.max()), 9) + "\n"
        }
        let violations = self.checksBounds ? self.boundViolations(unownedByChange: unownedByChange) : []
        text += self.bounds(violations)
        text += self.ownershipDetail(unowned: unowned)
        text += self.deliveryDetail(partitionGaps: partitionGaps)
        text += self.mockGroupStates()
        text += self.duplicates(holds: holds)
        text += self.commits()
        text += self.instanceTable()
        text += self.accounting()
        text += self.simulator()
        text += self.whose()
        return (text, violations.isEmpty)
    }

    /// Stretches that began with `change` (from 1 s before it, so that a revocation logged just before the soak noted
    /// the change counts) and before the next change, of at least 0.5 s.
    static func window(of change: SoakChange, to windowEnd: Double) -> ((from: Double, to: Double)) -> Bool {
        { stretch in stretch.from >= change.time - 1 && stretch.from < windowEnd && stretch.to - stretch.from >= 0.5 }
    }

    /// For each change, the longest stretch without an owner of every partition that had one (sorted).
    func unownedByChange(_ unowned: [Int32: [(from: Double, to: Double)]], runEnd: Double) -> [[Double]] {
        self.changes.enumerated().map { position, change in
            let windowEnd = position + 1 < self.changes.count ? self.changes[position + 1].time : runEnd
            let inWindow = Self.window(of: change, to: windowEnd)
            return self.partitions.compactMap { partition in
                (unowned[partition] ?? []).filter(inWindow).map { $0.to - $0.from }.max()
            }.sorted()
        }
    }

    /// How long a moved partition may have no owner on a coordinator that completes joins as Kafka's does: after a
    /// graceful join or leave, two heartbeats, two join rounds and the revocation's drain take about a second
    /// (docs/operations.md, "Scaling the group"); this leaves room for a loaded host.
    static let gracefulUnownedBoundSeconds = 5.0
    /// After a SIGKILL, the session timeout plus this.
    static let killUnownedMarginSeconds = 5.0

    /// Whether the ownership bounds held: checked on kfake only, the one test broker whose coordinator behaves like
    /// Kafka's (on the others the coordinator's own waits dominate: docs/kafka.md).
    var checksBounds: Bool { self.options.broker == .kfake }

    /// Each change whose longest stretch without an owner exceeded its bound: its label, the stretch and the bound.
    func boundViolations(unownedByChange: [[Double]]) -> [(label: String, longest: Double, bound: Double)] {
        zip(self.changes, unownedByChange).compactMap { change, longest in
            guard let bound = self.unownedBound(change), let worst = longest.last, worst > bound else { return nil }
            return (change.label, worst, bound)
        }
    }

    /// The bound for `change`: graceful joins and leaves, and a SIGKILL; none for the first start, the outage and the
    /// end.
    func unownedBound(_ change: SoakChange) -> Double? {
        switch change.kind {
        case .start(let numbers): numbers.count == 1 ? Self.gracefulUnownedBoundSeconds : nil
        case .terminate: Self.gracefulUnownedBoundSeconds
        case .kill: self.sessionTimeoutSeconds + Self.killUnownedMarginSeconds
        case .outage, .finalTerminate: nil
        }
    }

    func bounds(_ violations: [(label: String, longest: Double, bound: Double)]) -> String {
        guard self.checksBounds else { return "" }
        var text = "\nBounds (a coordinator that completes joins as Kafka's does): no owner for at most "
        text += Self.format(Self.gracefulUnownedBoundSeconds, 0) + " s after a graceful join or leave, "
        text += Self.format(self.sessionTimeoutSeconds + Self.killUnownedMarginSeconds, 0)
        text += " s (session timeout + " + Self.format(Self.killUnownedMarginSeconds, 0) + " s) after a SIGKILL: "
        if violations.isEmpty { return text + "held\n" }
        text += "NOT held\n"
        for violation in violations {
            text +=
                "  \(violation.label): \(Self.format(violation.longest, 1)) s > \(Self.format(violation.bound, 0)) s\n"
        }
        return text
    }

    func header() -> String {
        let properties =
            self.options.consumerProperties.isEmpty
            ? "none (PushBridge's defaults: "
                + BridgeRuntime.consumerDefaults.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }
                .joined(separator: "; ") + ")"
            : self.options.consumerProperties.map { "\($0.0)=\($0.1)" }.joined(separator: ", ")
        var text = "\nPushBridge soak (make soak): \(self.clusterDescription)\n"
        text +=
            "  \(self.produced) events at \(self.options.ratePerSecond)/s for \(self.options.durationSeconds) s into "
        text += "\(self.options.partitionCount) partitions; consumer group \(self.group)\n"
        text += "  consumer properties: \(properties)\n"
        text += "  APNs: pushbridge simulator, GOAWAY after \(self.options.goawayAfterStreams) streams, "
        text += "\(Self.format(self.options.rate503 * 100, 1))% 503 (retried by the bridge: apns.retry, 5 attempts)\n"
        text += "  host: \(Self.host()); \(Self.gitDescription()); \(Self.utc(self.runStart))\n"
        return text
    }

    /// The stretches in which no partition at all was held by anyone.
    static func groupUnowned(_ holds: [Ownership], from start: Double, to end: Double) -> [(from: Double, to: Double)] {
        Self.unowned(holds, from: start, to: end)
    }

    func ownershipDetail(unowned: [Int32: [(from: Double, to: Double)]]) -> String {
        self.stretches(
            "Partitions without an owner for 1 s or more (from - to, s from the start)", unowned
        ) { $0.to - $0.from >= 1 }
    }

    func deliveryDetail(partitionGaps: [Int32: [(from: Double, to: Double)]]) -> String {
        self.stretches(
            "Delivery stops of 2 s or more per partition, while events flowed (from - to, s from the start)",
            partitionGaps
        ) { $0.to - $0.from >= 2 && $0.from < self.lastEventAt }
    }

    /// Under `title`, a line per partition with the stretches of `byPartition` that `keep` selects, as
    /// `from-to (length)` in seconds from the start.
    private func stretches(
        _ title: String, _ byPartition: [Int32: [(from: Double, to: Double)]],
        keep: ((from: Double, to: Double)) -> Bool
    ) -> String {
        var text = "\n\(title)\n"
        for partition in self.partitions {
            let kept = (byPartition[partition] ?? []).filter(keep)
            guard !kept.isEmpty else { continue }
            text += "  p\(partition): "
            text +=
                kept.map {
                    "\(Self.format($0.from - self.runStart, 1))-\(Self.format($0.to - self.runStart, 1))"
                        + " (\(Self.format($0.to - $0.from, 1)))"
                }.joined(separator: ", ") + "\n"
        }
        return text
    }

    /// The mock's consumer group as its own debug lines tell it (`--mock-debug`): every change of state with the
    /// member count and the reason, members that timed out or left, leaders elected.
    func mockGroupStates() -> String {
        guard let path = self.mockDebugLog, let data = FileManager.default.contents(atPath: path) else { return "" }
        var text = "\nThe mock's consumer group \(self.group) (its debug lines, mock-debug.log; s from the start)\n"
        // %7|1795699714.529|MOCK|rdkafka#producer-1| [thrd:…]: Mock consumer group G with 2 member(s) changing state …
        for raw in data.split(separator: UInt8(ascii: "\n")) {
            let line = String(decoding: raw, as: UTF8.self)
            guard line.contains(self.group),
                line.contains("changing state") || line.contains("session timed out")
                    || line.contains("is leaving group") || line.contains("elected leader"),
                let time = line.split(separator: "|", omittingEmptySubsequences: false).dropFirst().first
                    .flatMap({ Double($0) }),
                let start = line.range(of: "]: ")
            else { continue }
            let message = line[start.upperBound...].replacingOccurrences(
                of: "Mock consumer group \(self.group) ", with: ""
            )
            .replacingOccurrences(of: "consumer group \(self.group)", with: "the group")
            text += "  " + Self.pad(Self.format(time - self.runStart, 1), 7) + "  \(message)\n"
        }
        return text
    }

    // MARK: Duplicates

    enum Cause: String, CaseIterable {
        case killRecent = "SIGKILL: finished or in flight in the last 2 s before it (commit_interval 1 s)"
        case killOlder = "SIGKILL: finished earlier but not committed (commits refused or failing before it)"
        case lost = "revocation with the assignment lost (lost=true): nothing committed"
        case drainTimedOut = "drain timed out (rebalance or shutdown): unfinished work released uncommitted"
        case commitFailed = "the commit on revocation failed or was refused"
        case closeTimedOut = "the shutdown's consumer close ran out of time (3 s) before its commit was answered"
        case endedWithProcess = "the process ended without a logged revocation (close ran out of time)"
        case clean = "clean handover (drained and committed): not explained by the logs"
        case unknown = "no hold found for the earlier outcome in the logs"
    }

    func duplicates(holds: [Ownership]) -> String {
        let byID = Dictionary(grouping: self.records.outcomes, by: \.notificationID)
        let holdsByPartition = Dictionary(grouping: holds, by: \.partition)
        var causes: [Cause: Int] = [:]
        var byHandover: [String: Int] = [:]
        var commitErrors: [String: Int] = [:]
        var duplicateCount = 0
        var repeatedIDs = 0
        for (_, outcomes) in byID where outcomes.count > 1 {
            repeatedIDs += 1
            let ordered = outcomes.sorted { $0.sentAt < $1.sentAt }
            for (earlier, _) in zip(ordered, ordered.dropFirst()) {
                duplicateCount += 1
                // The hold that produced the earlier outcome: the latest one of its partition that began before it.
                let hold = (holdsByPartition[earlier.partition] ?? []).last { hold in
                    hold.start <= earlier.sentAt + 0.5 && (hold.workEnd ?? .infinity) + 1 >= earlier.sentAt
                }
                guard let hold else {
                    causes[.unknown, default: 0] += 1
                    continue
                }
                let cause: Cause
                if hold.killed {
                    cause = (hold.end ?? 0) - earlier.completedAt <= 2 ? .killRecent : .killOlder
                } else if hold.lost {
                    cause = .lost
                } else if hold.drainTimedOut {
                    cause = .drainTimedOut
                } else if let failure = hold.commitFailure {
                    cause = .commitFailed
                    commitErrors[failure, default: 0] += 1
                } else if hold.closeTimedOut {
                    cause = .closeTimedOut
                } else if hold.endedWithProcess {
                    cause = .endedWithProcess
                } else {
                    cause = .clean
                }
                causes[cause, default: 0] += 1
                let change = self.changes.last { $0.time <= (hold.end ?? 0) + 0.5 }
                let key =
                    "#\(hold.instance) gave up its partitions at \(Self.format((hold.end ?? 0) - self.runStart, 1)) s"
                    + (change.map { " (after \($0.label))" } ?? "")
                byHandover[key, default: 0] += 1
            }
        }
        let share = self.produced > 0 ? Double(duplicateCount) / Double(self.produced) * 100 : 0
        var text = "\nDuplicate outcomes (a notification_id more than once): \(duplicateCount) "
        text += "(\(Self.format(share, 1))% of \(self.produced) events), \(repeatedIDs) ids repeated\n"
        text += "  by cause (the hold that produced the earlier outcome, and how it ended, from the instance's log):\n"
        for cause in Cause.allCases where causes[cause, default: 0] > 0 {
            text += "    " + Self.pad("\(causes[cause, default: 0])", 6) + "  \(cause.rawValue)"
            if cause == .commitFailed, !commitErrors.isEmpty {
                text += " (" + commitErrors.sorted { $0.key < $1.key }.map { "\($0.key)" }.joined(separator: ", ") + ")"
            }
            text += "\n"
        }
        if duplicateCount > 0 {
            text += "  by handover:\n"
            for (key, count) in byHandover.sorted(by: { $0.key < $1.key }) {
                text += "    " + Self.pad("\(count)", 6) + "  \(key)\n"
            }
        }
        return text
    }

    // MARK: Commits, instances, accounting

    func commits() -> String {
        var text = "\nCommits after the last event (\(Self.utc(self.lastEventAt))): "
        if let reached = self.commitsReachedAt {
            text +=
                "the group's committed offsets reached the end offsets \(Self.format(reached - self.lastEventAt, 1)) s "
            text += "after it (bound \(self.options.settleSeconds) s)\n"
        } else {
            text += "NOT at the end offsets within \(self.options.settleSeconds) s; after the last SIGTERM:\n"
        }
        let behind = self.partitions.filter { self.committed[$0, default: 0] < self.ends[$0, default: 0] }
        if !behind.isEmpty {
            text += "  behind at the end: "
            text +=
                behind.map { partition in
                    let committed = self.committed[partition].map { "\($0)" } ?? "none"
                    return "p\(partition) \(committed)/\(self.ends[partition, default: 0])"
                }.joined(separator: ", ") + "\n"
        } else if self.commitsReachedAt == nil {
            text += "  every partition is at its end offset after the final shutdown\n"
        }
        return text
    }

    func instanceTable() -> String {
        var text = "\nInstances (s from the start)\n"
        text += "  #   started  signal           exited  exit  peak RSS   warnings and errors in its log\n"
        for instance in self.instances {
            let state = instance.state.withLock { $0 }
            let signal = state.signal.map { ($0 == SIGKILL ? "SIGKILL" : "SIGTERM") } ?? "-"
            let signalled = state.signalledAt.map { " " + Self.format($0 - self.runStart, 1) } ?? ""
            var warnings: [String: Int] = [:]
            for line in LogLine.read(path: instance.logPath)
            where ["warning", "error", "critical"].contains(line.level) {
                let code = (line.errorCode ?? line.fields["kafka.facility"]).map { " (\($0))" } ?? ""
                warnings[String(line.message.prefix(60)) + code, default: 0] += 1
            }
            text += "  " + Self.pad("\(instance.number)", 2, left: true)
            text += "  " + Self.pad(Self.format(instance.startedAt - self.runStart, 1), 7)
            text += "  " + Self.pad(signal + signalled, 15, left: true)
            text += "  " + Self.pad(state.exitedAt.map { Self.format($0 - self.runStart, 1) } ?? "-", 6)
            text += "  " + Self.pad(state.exitStatus.map { "\($0)" } ?? "-", 4)
            text += "  " + Self.pad(Self.format(state.peakRSSMebibytes, 1) + " MiB", 9)
            text += warnings.isEmpty ? "  none\n" : "\n"
            for (message, count) in warnings.sorted(by: { $0.value > $1.value }) {
                text += "        \(count) × \(message)\n"
            }
        }
        return text
    }

    func accounting() -> String {
        let outcomes = self.records.outcomes
        let withOutcome = Set(outcomes.map(\.eventIndex))
        let missing = self.missing
        var statuses: [String: Int] = [:]
        for outcome in outcomes { statuses[outcome.status, default: 0] += 1 }
        let retried = outcomes.filter { $0.attempts > 1 }.count
        var text =
            "\nAccounting: \(self.produced) events produced (acknowledged); \(withOutcome.count) with an outcome, "
        text += "\(self.records.deadLetters.count) dead-lettered, \(missing.count) with neither"
        text += missing.isEmpty ? " — every event accounted for\n" : "\n"
        if !missing.isEmpty {
            text += "  missing (event index / partition): "
            text += missing.prefix(20).map { "\($0)/p\($0 % self.options.partitionCount)" }.joined(separator: ", ")
            text += missing.count > 20 ? ", …\n" : "\n"
        }
        text += "  \(outcomes.count) outcome records: "
        text += statuses.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", ")
        text += "; \(retried) took more than one attempt (503s and re-sends after GOAWAY)"
        text += "; \(self.records.invalidTokens) invalid-token records; \(self.records.unreadable) unreadable records\n"
        return text
    }

    func simulator() -> String {
        let lines = self.simulatorSummary.split(separator: "\n").filter {
            $0.hasPrefix("requests received") || $0.hasPrefix("connections dropped") || $0.hasPrefix("  status")
                || $0.hasPrefix("  reason")
        }
        guard !lines.isEmpty else { return "\nAPNs simulator: no summary (see simulator.log)\n" }
        return "\nAPNs simulator (its summary at exit)\n" + lines.map { "  " + $0 }.joined(separator: "\n") + "\n"
    }

    func whose() -> String {
        let session = Self.format(self.sessionTimeoutSeconds, 0)
        let wait = Self.format(self.sessionTimeoutSeconds - 1, 0)
        var text = "\nWhose figures\n"
        switch self.options.broker {
        case .mock:
            text += """
                - The mock cluster's: once a group with members rebalances, librdkafka 2.0.2's mock completes the join
                  only after session.timeout.ms - 1 s (\(wait) s here; rd_kafka_mock_cgrp_rebalance), and it refuses
                  OffsetCommit with REBALANCE_IN_PROGRESS while the group joins (rd_kafka_mock_cgrp_check_state). A "no
                  owner" time near \(wait) s after a graceful join or leave, the commit warnings during it and the
                  duplicates whose cause is a refused commit are the mock's: Apache Kafka completes a join once every
                  known member rejoined and accepts the commit of the current generation while it prepares a rebalance.

                """
        case .tansu:
            text += """
                - Tansu's: its group coordinator decides when a join completes and whether a commit during a rebalance
                  is accepted; the "no owner" times after graceful changes are its figures, not Apache Kafka's.

                """
        case .kfake:
            text += """
                - kfake's: its coordinator completes a join as soon as every known member rejoined and accepts the
                  commit of the current generation while the group prepares a rebalance, as Apache Kafka's does, so
                  the "no owner" times after graceful changes are what Kafka's protocol allows, plus the bridge's
                  drain. It is still a fake: no replication, no disk, one process.

                """
        }
        text += """
            - Kafka's protocol, on any broker: after the SIGKILL the dead member keeps its partitions until the
              coordinator misses its heartbeats for session.timeout.ms (\(session) s here), then the group rebalances.
            - The test's own: every broker down for \(self.options.outageSeconds) s stops delivery for at least that
              long (records cannot be published or committed); the APNs faults (GOAWAY, 503) add retries, not outcomes.
            - The bridge's: how long a revocation's drain takes (shutdown.rebalance_drain_timeout 10 s) and whether it
              ran out, what it commits before it lets partitions go, duplicates from work in flight at the SIGKILL or
              a timed-out drain, the time to resume after the outage, each instance's peak RSS, and the accounting.

            """
        return text
    }

    // MARK: Formatting

    static func format(_ value: Double, _ decimals: Int) -> String { String(format: "%.\(decimals)f", value) }

    static func seconds(_ value: Double?) -> String { value.map { Self.format($0, 1) + " s" } ?? "-" }

    static func pad(_ text: String, _ width: Int, left: Bool = false) -> String {
        guard text.count < width else { return text }
        let padding = String(repeating: " ", count: width - text.count)
        return left ? text + padding : padding + text
    }

    static func utc(_ time: Double) -> String {
        let formatter = ISO8601DateFormatter()
        return formatter.string(from: Date(timeIntervalSince1970: time))
    }

    static func host() -> String {
        let cpuinfo = (try? String(contentsOfFile: "/proc/cpuinfo", encoding: .utf8)) ?? ""
        let model =
            cpuinfo.split(separator: "\n").first { $0.hasPrefix("model name") }?.split(separator: ":").last
            .map { $0.trimmingCharacters(in: .whitespaces) } ?? "unknown CPU"
        return "\(ProcessInfo.processInfo.activeProcessorCount) cores (nproc), \(model)"
    }

    static func gitDescription() -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/git")
        process.arguments = ["log", "-1", "--format=commit %h (%cs)"]
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        guard (try? process.run()) != nil else { return "commit unknown" }
        process.waitUntilExit()
        let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        return text.trimmingCharacters(in: .whitespacesAndNewlines)
    }
}
