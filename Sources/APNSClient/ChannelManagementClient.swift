import APNSCore
import Foundation
import HTTP2
import Logging
import NIOCore
import NIOPosix

/// A broadcast channel's message storage policy, fixed when the channel is created (Apple: *Sending channel
/// management requests to APNs*).
package enum MessageStoragePolicy: Int, Sendable, Hashable, CaseIterable {
    /// `0`, No Message Stored: APNs delivers only to devices online now; the higher publishing budget.
    case noMessageStored = 0
    /// `1`, Most Recent Message Stored: APNs keeps the newest message for devices that come online later.
    case mostRecentMessageStored = 1
}

/// A channel's configuration as APNs reports it (a read).
package struct ChannelConfiguration: Sendable, Hashable {
    /// `message-storage-policy`.
    package var storagePolicy: MessageStoragePolicy
    /// `push-type`; Apple's only value is `LiveActivity`.
    package var pushType: String

    /// Creates a configuration.
    package init(storagePolicy: MessageStoragePolicy, pushType: String) {
        self.storagePolicy = storagePolicy
        self.pushType = pushType
    }
}

/// What a successful channel management request returned, and APNs' `apns-request-id` for it.
package struct ChannelAnswer<Value: Sendable>: Sendable {
    /// The typed result: a channel ID, a list of them, a configuration, or nothing for a delete.
    package var value: Value
    /// `apns-request-id` of the response: the request's own, or the one APNs generated (`nil` when absent or
    /// not a short visible-ASCII value).
    package var requestID: String?
}

extension ChannelAnswer: Equatable where Value: Equatable {}

/// Why a channel management request failed: APNs' answer with its reason, or no usable answer at all.
package struct ChannelManagementError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What kind of failure.
    package enum Code: String, Sendable, Hashable {
        /// APNs answered with an error status and reason (``reason``).
        case rejected
        /// The answer broke the API's contract: a success without the channel ID header, a body that is not the
        /// documented JSON, a body or header beyond the bounds.
        case malformedResponse
        /// No answer within the request timeout.
        case timeout
        /// No connection could be made (DNS, TCP, TLS, credentials refused in the handshake).
        case unreachable
        /// The connection broke before the answer.
        case connectionLost
        /// The request was refused before sending (a channel ID that cannot travel in a header, no token).
        case invalidRequest
    }

    /// What kind of failure.
    package var code: Code
    /// The HTTP status, when APNs answered.
    package var status: Int?
    /// APNs' reason, when it answered with one (bounded and escaped if it is not one Apple documents).
    package var reason: Reason?
    /// `apns-request-id` of the answer, when there was one.
    package var requestID: String?
    /// A sentence for people; never holds credentials.
    package var message: String

    /// Creates an error.
    package init(_ code: Code, status: Int? = nil, reason: Reason? = nil, requestID: String? = nil, message: String) {
        self.code = code
        self.status = status
        self.reason = reason
        self.requestID = requestID
        self.message = message
    }

    /// `message`, with status, reason and request ID when known.
    package var description: String {
        var text = self.message
        if let status = self.status {
            text += " (status \(status)" + (self.reason.map { ", \($0.rawValue)" } ?? "") + ")"
        }
        if let requestID = self.requestID { text += " [apns-request-id \(requestID)]" }
        return text
    }
}

/// Apple's broadcast channel management API: create, read, delete and list the channels of one app (Apple:
/// *Sending channel management requests to APNs*). It runs on its own hosts
/// (``APNSClientConfiguration/Endpoint/managementProduction``, ``APNSClientConfiguration/Endpoint/managementSandbox``)
/// with the same credentials as device pushes: a provider token (renewed once on 403 `ExpiredProviderToken`)
/// or the client certificate.
///
/// Every request is bounded: a connection within ``APNSClientConfiguration/requestTimeout`` (each attempt within
/// ``APNSClientConfiguration/connectTimeout``), then the answer within ``APNSClientConfiguration/requestTimeout``;
/// a request refused unprocessed (GOAWAY) is sent once more. Answers are bounded (``maximumResponseBodyBytes``, ``maximumChannelIDBytes``) and anything else than the documented
/// answer is a ``ChannelManagementError``, never a crash or a hang. One HTTP/2 connection (the device client's
/// pool and connection) is opened on the first request.
package final class ChannelManagementClient: Sendable {
    /// The configuration in force; ``APNSClientConfiguration/endpoint`` is the management endpoint.
    package let configuration: APNSClientConfiguration
    private let pool: ConnectionPool

    /// The largest answer body read: a list of 10 000 channel IDs (Apple's per-app limit) is about 300 KB.
    package static let maximumResponseBodyBytes = 1 << 20
    /// The longest channel ID accepted, from APNs or from a caller (Apple: don't assume their size; they are
    /// base64, about 24 characters today).
    package static let maximumChannelIDBytes = 256
    /// The most IDs a list answer may hold (far above Apple's per-app limit of 10 000).
    package static let maximumListedChannels = 100_000

    /// Creates a client; the connection is opened on the first request.
    package init(
        configuration: APNSClientConfiguration,
        eventLoopGroup: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton,
        logger: Logger = Logger(label: "pushbridge.apns.channels")
    ) {
        var configuration = configuration
        // One connection: the request that finds it missing opens it, so the pool never opens one in the
        // background and needs no `run()`.
        configuration.connectionCount = 1
        self.configuration = configuration
        self.pool = ConnectionPool(
            configuration,
            maxResponseBodyBytes: Self.maximumResponseBodyBytes,
            keptResponseHeaders: ["apns-channel-id", "apns-request-id"],
            eventLoopGroup: eventLoopGroup,
            logger: logger
        )
    }

    /// Creates a channel for the app `bundleID` and returns its ID (`POST /1/apps/<bundleID>/channels`, 201).
    package func create(
        bundleID: String, storagePolicy: MessageStoragePolicy, requestID: UUID? = nil
    ) async throws(ChannelManagementError) -> ChannelAnswer<String> {
        let body = #"{"message-storage-policy":\#(storagePolicy.rawValue),"push-type":"LiveActivity"}"#
        let response = try await self.perform(
            "POST", try Self.path(bundleID, "channels"), channelID: nil, requestID: requestID, body: Array(body.utf8),
            expecting: 201)
        guard let raw = response.headers.first("apns-channel-id") else {
            throw self.malformed(response, "APNs answered 201 without the apns-channel-id header")
        }
        guard let channelID = Self.boundedChannelID(raw) else {
            throw self.malformed(response, "the apns-channel-id APNs answered is not a channel ID")
        }
        return ChannelAnswer(value: channelID, requestID: Self.requestID(of: response))
    }

    /// Reads a channel's storage policy and push type (`GET /1/apps/<bundleID>/channels`, 200).
    package func read(
        bundleID: String, channelID: String, requestID: UUID? = nil
    ) async throws(ChannelManagementError) -> ChannelAnswer<ChannelConfiguration> {
        let response = try await self.perform(
            "GET", try Self.path(bundleID, "channels"), channelID: channelID, requestID: requestID, body: [],
            expecting: 200)
        guard let read = Self.decode(ReadBody.self, response.body),
            let policy = MessageStoragePolicy(rawValue: read.storagePolicy),
            Self.boundedChannelID(read.pushType) != nil
        else {
            throw self.malformed(
                response, "the channel APNs answered is not {\"message-storage-policy\": 0|1, \"push-type\": ...}")
        }
        return ChannelAnswer(
            value: ChannelConfiguration(storagePolicy: policy, pushType: read.pushType),
            requestID: Self.requestID(of: response))
    }

    /// Deletes a channel (`DELETE /1/apps/<bundleID>/channels`, 204). Messages already sent on it may still be
    /// delivered (Apple).
    package func delete(
        bundleID: String, channelID: String, requestID: UUID? = nil
    ) async throws(ChannelManagementError) -> ChannelAnswer<Void> {
        let response = try await self.perform(
            "DELETE", try Self.path(bundleID, "channels"), channelID: channelID, requestID: requestID, body: [],
            expecting: 204)
        return ChannelAnswer(value: (), requestID: Self.requestID(of: response))
    }

    /// Lists the IDs of every channel of the app (`GET /1/apps/<bundleID>/all-channels`, 200).
    package func list(
        bundleID: String, requestID: UUID? = nil
    ) async throws(ChannelManagementError) -> ChannelAnswer<[String]> {
        let response = try await self.perform(
            "GET", try Self.path(bundleID, "all-channels"), channelID: nil, requestID: requestID, body: [],
            expecting: 200)
        guard let listed = Self.decode(ListBody.self, response.body),
            listed.channels.count <= Self.maximumListedChannels
        else {
            throw self.malformed(response, "the list APNs answered is not {\"channels\": [\"<id>\", ...]}")
        }
        for channelID in listed.channels where Self.boundedChannelID(channelID) == nil {
            throw self.malformed(response, "the list APNs answered holds an entry that is not a channel ID")
        }
        return ChannelAnswer(value: listed.channels, requestID: Self.requestID(of: response))
    }

    /// Closes the connection. Requests after this fail with `unreachable`.
    package func shutdown() async {
        await self.pool.shutdown()
    }

    // MARK: Requests

    private func perform(
        _ method: String, _ path: String, channelID: String?, requestID: UUID?, body: [UInt8], expecting status: Int
    ) async throws(ChannelManagementError) -> HTTP2Response {
        var headers: [HTTP2Header] = []
        if let channelID {
            guard Self.boundedChannelID(channelID) != nil else {
                throw ChannelManagementError(
                    .invalidRequest,
                    message: "the channel ID must be 1 to \(Self.maximumChannelIDBytes) visible ASCII characters "
                        + "(the base64 ID that create printed)")
            }
            headers.append(HTTP2Header("apns-channel-id", channelID, indexing: .never))
        }
        if let requestID {
            headers.append(HTTP2Header("apns-request-id", requestID.uuidString.lowercased(), indexing: .never))
        }
        if !body.isEmpty {
            headers.append(HTTP2Header("content-type", "application/json"))
        }
        var request = HTTP2Request(method: method, path: path, pathIndexing: .incremental, headers: headers, body: body)
        var token: ProviderTokenJWT?
        if case .token(let source) = self.configuration.authentication {
            do {
                token = try source.currentToken()
            } catch {
                throw ChannelManagementError(.invalidRequest, message: "cannot sign the provider token: \(error)")
            }
            request.headers.append(HTTP2Header("authorization", "bearer \(token!.compact)", indexing: .never))
        }
        var response = try await self.attempt(request)
        if response.status == 403, Self.reason(of: response) == .expiredProviderToken,
            case .token(let source) = self.configuration.authentication, let used = token,
            let fresh = try? source.tokenAfterExpiry(of: used)
        {
            request.headers.removeAll { $0.name == "authorization" }
            request.headers.append(HTTP2Header("authorization", "bearer \(fresh.compact)", indexing: .never))
            response = try await self.attempt(request)
        }
        guard response.status == status else {
            let reason = Self.reason(of: response)
            throw ChannelManagementError(
                .rejected, status: response.status, reason: reason, requestID: Self.requestID(of: response),
                message: "APNs refused the \(method) \(path) request: \(reason.map(Self.explanation) ?? "")")
        }
        return response
    }

    /// One attempt within the request timeout; a request the server did not process (GOAWAY) is sent once more.
    private func attempt(_ request: HTTP2Request) async throws(ChannelManagementError) -> HTTP2Response {
        var resent = false
        while true {
            let deadline = ContinuousClock.now + self.configuration.requestTimeout
            guard let connection = await self.pool.lease(deadline: deadline) else {
                throw ChannelManagementError(
                    .unreachable,
                    message: "no connection to \(self.configuration.endpoint) could be opened: "
                        + (self.pool.lastConnectError ?? "timed out"))
            }
            defer { self.pool.release(connection) }
            do {
                return try await connection.send(request)
            } catch let error as HTTP2Error {
                switch error.code {
                case .notProcessed where !resent, .closed where !resent:
                    resent = true
                    continue
                case .timeout:
                    throw ChannelManagementError(
                        .timeout,
                        message: "no answer from \(self.configuration.endpoint) within "
                            + "\(self.configuration.requestTimeout)")
                case .malformedResponse:
                    throw ChannelManagementError(
                        .malformedResponse, message: "the answer was unusable: \(error.message)")
                case .invalidRequest:
                    throw ChannelManagementError(.invalidRequest, message: error.message)
                case .connectFailed, .serverStartFailed:
                    throw ChannelManagementError(.unreachable, message: error.message)
                case .notProcessed, .closed, .connectionLost, .cancelled:
                    throw ChannelManagementError(
                        .connectionLost,
                        message: "the connection to \(self.configuration.endpoint) broke: \(error.message)")
                }
            } catch {
                throw ChannelManagementError(.connectionLost, message: "the request failed: \(error)")
            }
        }
    }

    // MARK: Reading answers

    private func malformed(_ response: HTTP2Response, _ message: String) -> ChannelManagementError {
        ChannelManagementError(
            .malformedResponse, status: response.status, requestID: Self.requestID(of: response), message: message)
    }

    /// `/1/apps/<bundleID>/<resource>`; a bundle ID is letters, digits, `-` and `.` (Apple), so it needs no
    /// escaping, and anything else is refused before sending.
    static func path(_ bundleID: String, _ resource: String) throws(ChannelManagementError) -> String {
        guard !bundleID.isEmpty, bundleID.utf8.count <= 155,
            bundleID.utf8.allSatisfy({ byte in
                (byte >= UInt8(ascii: "a") && byte <= UInt8(ascii: "z"))
                    || (byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z"))
                    || (byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9"))
                    || byte == UInt8(ascii: "-") || byte == UInt8(ascii: ".") || byte == UInt8(ascii: "_")
            })
        else {
            throw ChannelManagementError(
                .invalidRequest,
                message: "'\(APNSClient.boundedReason(bundleID))' is not a bundle ID (letters, digits, '-' and '.', "
                    + "e.g. com.example.app)")
        }
        return "/1/apps/\(bundleID)/\(resource)"
    }

    /// `value` when it is 1 to ``maximumChannelIDBytes`` visible ASCII characters, else `nil`.
    static func boundedChannelID(_ value: String) -> String? {
        guard !value.isEmpty, value.utf8.count <= Self.maximumChannelIDBytes,
            value.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F })
        else { return nil }
        return value
    }

    private static func requestID(of response: HTTP2Response) -> String? {
        response.headers.first("apns-request-id").flatMap(APNSClient.boundedID)
    }

    /// The reason of an error answer; a body that is not Apple's JSON becomes `unknown("MalformedResponseBody")`,
    /// an unknown reason is bounded and escaped.
    private static func reason(of response: HTTP2Response) -> Reason? {
        guard !(200..<300).contains(response.status) else { return nil }
        let reason = ErrorBody.parse(response.body)?.reason ?? .unknown(ErrorBody.malformedReason)
        if case .unknown(let raw) = reason { return .unknown(APNSClient.boundedReason(raw)) }
        return reason
    }

    /// The body of a read: `{"message-storage-policy": 0|1, "push-type": "LiveActivity"}`.
    private struct ReadBody: Decodable {
        var storagePolicy: Int
        var pushType: String

        enum CodingKeys: String, CodingKey {
            case storagePolicy = "message-storage-policy"
            case pushType = "push-type"
        }
    }

    /// The body of a list: `{"channels": ["<id>", ...]}`.
    private struct ListBody: Decodable {
        var channels: [String]
    }

    private static func decode<Body: Decodable>(_ type: Body.Type, _ body: [UInt8]) -> Body? {
        guard !body.isEmpty else { return nil }
        return try? JSONDecoder().decode(type, from: Data(body))
    }

    /// What a reason means for the person running the command, with the fix where there is one.
    static func explanation(_ reason: Reason) -> String {
        let what: String
        switch reason {
        case .channelNotRegistered:
            what = "the channel does not exist (never created, deleted, or of the other environment)"
        case .badChannelId: what = "the channel ID is malformed; use the ID create printed"
        case .missingChannelId: what = "the request needs a channel ID"
        case .cannotCreateChannelConfig:
            what = "the app has reached its channel limit (10 000 per environment); delete channels it no longer uses"
        case .featureNotEnabled:
            what = "broadcast push is not enabled for this app; enable it for the app ID on developer.apple.com"
        case .badRequestParams: what = "APNs refused the request's parameters (storage policy 0 or 1)"
        case .badRequestPayload: what = "APNs refused the request body"
        case .invalidPushType, .missingPushType: what = "APNs accepts only push type LiveActivity for channels"
        case .topicMismatch, .topicDisallowed, .badTopic:
            what = "the credentials are not valid for this bundle ID; check --topic and the app's key or certificate"
        case .missingProviderToken, .invalidProviderToken, .expiredProviderToken, .badCertificate,
            .badCertificateEnvironment, .forbidden:
            what = "APNs refused the credentials"
        default: what = "see Apple's reason"
        }
        return "\(reason.rawValue): \(what)"
    }
}

extension APNSClientConfiguration.Endpoint {
    /// `api-manage-broadcast.push.apple.com:2196`: production channel management (Apple: *Sending channel
    /// management requests to APNs*).
    package static let managementProduction = Self(host: "api-manage-broadcast.push.apple.com", port: 2196)
    /// `api-manage-broadcast.sandbox.push.apple.com:2195`: development channel management.
    package static let managementSandbox = Self(host: "api-manage-broadcast.sandbox.push.apple.com", port: 2195)
}
