import APNSCore

/// What the simulator received and how it answered, for tests, benchmarks and the standalone command.
package struct SimulatorStatistics: Sendable, Hashable {
    /// Counts for one device token.
    package struct TokenCounts: Sendable, Hashable {
        /// Requests received for the token.
        package var received = 0
        /// Requests answered (any status).
        package var answered = 0
        /// Requests answered 200.
        package var delivered = 0

        /// Zero counts.
        package init() {}

        /// Counts one request received, answered with `status` (`nil`: left unanswered).
        mutating func count(answeredWith status: Int?) {
            self.received += 1
            guard let status else { return }
            self.answered += 1
            if status == 200 { self.delivered += 1 }
        }
    }

    /// One broadcast send as it arrived: its path and the headers Apple's broadcast request consists of
    /// (`nil`: absent), and the status it was answered with.
    package struct BroadcastRequest: Sendable, Hashable {
        package var path: String
        package var channelID: String?
        package var pushType: String?
        package var topic: String?
        package var priority: String?
        package var expiration: String?
        package var requestID: String?
        /// `apns-id`, which Apple's broadcast table does not list (the request id is `apns-request-id`).
        package var messageID: String?
        package var collapseID: String?
        package var status: Int
    }

    /// The most broadcast sends ``recentBroadcasts`` keeps.
    package static let recentBroadcastLimit = 256

    /// The latest broadcast sends (at most ``recentBroadcastLimit``, oldest first), for tests and for checking
    /// what a client really sends.
    package var recentBroadcasts: [BroadcastRequest] = []

    /// Requests received (including those never answered).
    package var requestsReceived = 0
    /// Requests answered.
    package var requestsAnswered = 0
    /// Requests left unanswered because their connection was being dropped.
    package var requestsUnanswered = 0
    /// Answers by HTTP status.
    package var byStatus: [Int: Int] = [:]
    /// Non-200 answers by reason string.
    package var byReason: [String: Int] = [:]
    /// Requests received by the fingerprint of the client certificate their connection presented
    /// (``SimulatorRequest/fingerprint(of:)``).
    package var byClientCertificate: [String: Int] = [:]
    /// Counts by device token (as in the path).
    package var byToken: [String: TokenCounts] = [:]
    /// Broadcast sends by channel ID (only channels that exist; a send to an unknown one counts in the totals).
    package var byChannel: [String: TokenCounts] = [:]
    /// Channels created through the management API.
    package var channelsCreated = 0
    /// Channels deleted through the management API.
    package var channelsDeleted = 0
    /// Connections dropped on purpose (`drop_after_streams`).
    package var connectionsDropped = 0
    /// Stream-limit changes announced (`stream_limit_schedule`).
    package var streamLimitChanges = 0
    /// Times a connection took a provider token into use (its first, or a renewal).
    package var providerTokenAdoptions = 0
    /// Different provider tokens taken into use, over all connections.
    package var distinctProviderTokens = 0
    /// Provider-token signatures checked. A connection checks each token once and then trusts the same token
    /// string while it is young enough, so this grows with tokens and connections, not with requests; forged
    /// tokens are checked (and refused) every time.
    package var providerTokenVerifications = 0

    /// Empty statistics.
    package init() {}

    /// Counts one answer with `status` and, for an error, its reason.
    mutating func countAnswer(status: Int, reason: Reason?) {
        self.requestsAnswered += 1
        self.byStatus[status, default: 0] += 1
        if let reason { self.byReason[reason.rawValue, default: 0] += 1 }
    }

    /// Keeps `request` among ``recentBroadcasts``, dropping the oldest beyond the limit.
    mutating func recordBroadcast(_ request: BroadcastRequest) {
        if self.recentBroadcasts.count >= Self.recentBroadcastLimit { self.recentBroadcasts.removeFirst() }
        self.recentBroadcasts.append(request)
    }

    /// Tokens answered 200 more than once: what a client must never cause by re-sending answered requests.
    package var tokensDeliveredMoreThanOnce: [String] {
        self.byToken.filter { $0.value.delivered > 1 }.map(\.key).sorted()
    }

    /// A multi-line summary: totals, then answers by status and by reason.
    package var summary: String {
        var lines = [
            "requests received: \(self.requestsReceived), answered: \(self.requestsAnswered), "
                + "unanswered (dropped connections): \(self.requestsUnanswered)",
            "connections dropped: \(self.connectionsDropped), stream-limit changes: \(self.streamLimitChanges), "
                + "device tokens: \(self.byToken.count)",
            "broadcast channels sent to: \(self.byChannel.count), channels created: \(self.channelsCreated), "
                + "deleted: \(self.channelsDeleted)",
            "provider tokens taken into use: \(self.providerTokenAdoptions) "
                + "(\(self.distinctProviderTokens) different), signatures verified: \(self.providerTokenVerifications)",
        ]
        for (status, count) in self.byStatus.sorted(by: { $0.key < $1.key }) {
            lines.append("  status \(status): \(count)")
        }
        for (reason, count) in self.byReason.sorted(by: { $0.key < $1.key }) {
            lines.append("  reason \(reason): \(count)")
        }
        return lines.joined(separator: "\n")
    }

    /// The statistics as a JSON object (for `GET /_simulator/stats`).
    package var json: String {
        let statuses = self.byStatus.sorted { $0.key < $1.key }.map { "\"\($0.key)\":\($0.value)" }
        let reasons = self.byReason.sorted { $0.key < $1.key }.map { "\"\($0.key)\":\($0.value)" }
        let broadcasts = self.byChannel.values.reduce(0) { $0 + $1.received }
        return "{\"requests_received\":\(self.requestsReceived),\"requests_answered\":\(self.requestsAnswered),"
            + "\"requests_unanswered\":\(self.requestsUnanswered),\"connections_dropped\":\(self.connectionsDropped),"
            + "\"stream_limit_changes\":\(self.streamLimitChanges),\"device_tokens\":\(self.byToken.count),"
            + "\"provider_token_adoptions\":\(self.providerTokenAdoptions),"
            + "\"distinct_provider_tokens\":\(self.distinctProviderTokens),"
            + "\"provider_token_verifications\":\(self.providerTokenVerifications),"
            + "\"broadcast_channels\":\(self.byChannel.count),\"broadcasts_received\":\(broadcasts),"
            + "\"channels_created\":\(self.channelsCreated),\"channels_deleted\":\(self.channelsDeleted),"
            + "\"by_status\":{\(statuses.joined(separator: ","))},\"by_reason\":{\(reasons.joined(separator: ","))}}"
    }
}
