// Fuzz target: the APNs simulator's request validation (`SimulatorEngine.handle`, and through it
// `NotificationValidation` and `ProviderTokenJWT.parse`), fed one request as the HTTP/2 server hands it over,
// without sockets. The input is text:
//
//     METHOD PATH [cert]          the first line; `cert`: the connection presented a client certificate
//     name: value                 header lines, in order, up to the first empty line (names as given)
//                                 an empty line
//     body bytes                  the rest
//
// Bytes that are not UTF-8 are replaced, as the server does. The request is handled twice on one connection (a
// provider token accepted the first time is the connection's token the second time). The answers: a status
// APNs uses, header values of visible ASCII, and a non-200 body that is Apple's error JSON.
//
// Nothing outlives one input: every input gets its own engine; the key and the clock are constants.
//
// `FuzzSimulatorRequest --print-token` prints a provider token the scenario accepts, for seeds.

import APNSCore
import APNSSimulator
import Crypto
import Foundation
import FuzzSupport

/// The provider-token key the scenario accepts: a constant, so seeds can carry tokens signed with it. (A function,
/// not a global: swift-crypto's keys are not `Sendable`.)
func makePrivateKey() -> P256.Signing.PrivateKey {
    do {
        return try P256.Signing.PrivateKey(rawRepresentation: [UInt8](repeating: 7, count: 32))
    } catch {
        fatalError("the fuzz key is not a P-256 key: \(error)")
    }
}

/// The simulator's clock: a fixed time, so token ages are the same on every run.
struct FixedClock: WallClock {
    func now() -> Date { Date(timeIntervalSince1970: 1_790_000_000) }
}

let scenario: SimulatorScenario = {
    var scenario = SimulatorScenario()
    scenario.topics = ["com.example.app"]
    scenario.jwtKeys = [.init(keyID: "ABC123DEFG", teamID: "DEF123GHIJ", publicKey: makePrivateKey().publicKey)]
    scenario.badTokens = [String(repeating: "bad0", count: 16)]
    scenario.unregisteredTokens = [String(repeating: "dead", count: 16): 0, String(repeating: "0ff0", count: 16): 42]
    // One channel of each storage policy, so broadcast sends and channel reads, deletes and lists find something.
    scenario.channels = [
        .init(bundleID: "com.example.app", channelID: "dGVzdC1jaGFubmVs", storagePolicy: 0),
        .init(bundleID: "com.example.app", channelID: "c3RvcmVkLWNoYW5uZWw=", storagePolicy: 1),
    ]
    scenario.channelLimitPerApp = 3
    return scenario
}()

/// APNs' statuses, the channel management API's 201 (created) and 204 (deleted) included.
let statuses: Set<Int> = [200, 201, 204, 400, 403, 404, 405, 410, 413, 429, 500, 503]

func parseRequest(from bytes: [UInt8]) -> SimulatorRequest {
    var lines: [[UInt8]] = []
    var rest = bytes[...]
    while let newline = rest.firstIndex(of: 0x0A) {
        let line = rest[..<newline]
        rest = rest[(newline + 1)...]
        if line.isEmpty && !lines.isEmpty { break }
        lines.append(Array(line))
        if lines.count == 1, rest.isEmpty { break }
    }
    if lines.isEmpty {
        lines.append(Array(rest))
        rest = []
    }
    let first = String(decoding: lines[0], as: UTF8.self).split(separator: " ", omittingEmptySubsequences: false)
    let method = first.first.map(String.init) ?? ""
    let path = first.count > 1 ? String(first[1]) : ""
    let certificate = first.count > 2 && first[2] == "cert"
    let headers = lines.dropFirst().map { line -> (name: String, value: String) in
        guard let colon = line.firstIndex(of: UInt8(ascii: ":")) else {
            return (String(decoding: line, as: UTF8.self), "")
        }
        var value = line[(colon + 1)...]
        if value.first == UInt8(ascii: " ") { value = value.dropFirst() }
        return (String(decoding: line[..<colon], as: UTF8.self), String(decoding: value, as: UTF8.self))
    }
    return SimulatorRequest(
        method: method, path: path, headers: headers, body: Array(rest), connectionID: 1, streamNumber: 1,
        certificateAuthenticated: certificate)
}

func check(_ decision: SimulatorDecision, path: String) {
    guard case .respond(let answer, _) = decision else { return }
    precondition(statuses.contains(answer.status), "the simulator answered status \(answer.status)")
    for header in answer.headers {
        precondition(
            header.value.utf8.allSatisfy { $0 >= 0x20 && $0 < 0x7F },
            "the simulator answered \(header.name) with a control or non-ASCII byte")
    }
    if !(200..<300).contains(answer.status) {
        precondition(ErrorBody.parse(answer.body) != nil, "the simulator's error body does not parse")
    } else if path.hasPrefix("/1/apps/") {
        // Channel management: a read or a list answers a JSON object; create and delete answer nothing.
        precondition(
            answer.body.isEmpty || (try? JSONSerialization.jsonObject(with: Data(answer.body))) is [String: Any],
            "the simulator answered a channel request with a body that is not a JSON object")
    } else {
        precondition(answer.body.isEmpty, "the simulator answered \(answer.status) with a body")
    }
}

func fuzzOne(_ bytes: [UInt8]) {
    let engine = SimulatorEngine(scenario: scenario, clock: FixedClock())
    var request = parseRequest(from: bytes)
    check(engine.handle(request), path: request.path)
    request.streamNumber = 2
    check(engine.handle(request), path: request.path)
    _ = engine.connectionActions(connectionID: 1, streamCount: 2)
    engine.connectionClosed(1)
}

#if PUSHBRIDGE_LIBFUZZER
    @_cdecl("LLVMFuzzerTestOneInput")
    public func fuzzerTestOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
        fuzzOne(size == 0 ? [] : Array(UnsafeBufferPointer(start: data, count: size)))
        return 0
    }
#else
    @main
    struct FuzzSimulatorRequestMain {
        static func main() {
            if CommandLine.arguments.dropFirst().first == "--print-token" {
                do {
                    let token = try ProviderTokenJWT.sign(
                        keyID: "ABC123DEFG", teamID: "DEF123GHIJ", issuedAtEpochSeconds: 1_790_000_000 - 60,
                        privateKey: makePrivateKey())
                    print(token.compact)
                } catch {
                    print("cannot sign: \(error)")
                }
                return
            }
            FuzzDriver.main(target: "FuzzSimulatorRequest", fuzzOne)
        }
    }
#endif
