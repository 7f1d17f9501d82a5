import APNSCore
import ArgumentParser
import Configuration
import Foundation
import Routing

/// `pushbridge render`: a dry run of one route. Builds the event the bridge would consume from the route's
/// input topic (partition 0, offset 0), maps it, and prints the APNs requests it would send, or why it would
/// be dead-lettered. Sends nothing and needs no credentials: credential files are not checked.
///
/// Exit status: 0 when it renders notifications, 1 when the event would be dead-lettered, does not match the
/// route, or makes a notification APNs would reject (an oversized payload, a header value APNs cannot take), 2
/// for wrong usage or an invalid configuration.
struct RenderCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "render",
        abstract: "Print the APNs requests an event would produce through a route. Sends nothing.",
        discussion: """
            The event is read from --input (a file, or - for standard input) and treated as consumed from the \
            route's input topic at partition 0, offset 0, with the given key and headers. For each notification \
            the request line, the apns-* headers and the payload are printed; the payload is pretty-printed \
            unless --compact asks for the exact bytes that are sent. The route's context and the headers \
            outcomes.forward_headers forwards are printed as the event's records would carry them. Credential \
            files are not read.
            """
    )

    @Option(name: .long, help: ArgumentHelp("The route to try, by name.", valueName: "name"))
    var route: String

    @OptionGroup var configurationFile: ConfigurationOption

    @Option(name: .long, help: ArgumentHelp("The event's value: a file, or - for standard input.", valueName: "file"))
    var input: String = "-"

    @Option(name: .long, help: ArgumentHelp("The event's key (templates see it as _kafka.key).", valueName: "key"))
    var key: String?

    @Option(
        name: .long,
        help: ArgumentHelp("An event header (templates see it as _headers.NAME); repeatable.", valueName: "name=value")
    )
    var header: [String] = []

    @Flag(name: .long, help: "Print each payload exactly as sent (compact JSON) instead of indented.")
    var compact = false

    func validate() throws {
        for header in self.header where !header.contains("=") || header.hasPrefix("=") {
            throw ValidationError("--header \(header): expected NAME=VALUE")
        }
    }

    func run() async throws {
        let loaded = try self.configurationFile.load(checksCredentialFiles: false)
        guard let spec = loaded.configuration.routes.first(where: { $0.name == self.route }) else {
            let names = loaded.configuration.routes.map(\.name)
            FileHandleOutput.standardError(
                "pushbridge render: no route named \(self.route) in \(self.configurationFile.path) "
                    + "(routes: \(names.joined(separator: ", ")))\n"
            )
            throw ExitCode(2)
        }
        let event = SourceEvent(
            topic: spec.inputTopic, partition: 0, offset: 0, key: self.key.map { Array($0.utf8) },
            headers: self.header.map { header in
                // validate() made sure of the "="; split instead of force-unwrapping it all the same.
                let parts = header.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
                return (name: String(parts[0]), value: Array((parts.count > 1 ? parts[1] : "").utf8))
            },
            value: try self.readInput()
        )
        guard let trial = loaded.router.trial(of: event, route: spec.name) else {
            throw ExitCode(2)
        }
        let outcomes = loaded.configuration.outcomes
        let forwarded = outcomes.forwardHeaders.isEmpty ? nil : outcomes.forwardHeaders.select(from: event.headers)
        switch trial {
        case .notMatched(let mismatch):
            print("route \(spec.name): the event does not match: \(mismatch)")
            print("not mapped: the bridge would count it as unmatched and skip it")
            throw ExitCode(1)
        case .mapped(let mapping):
            switch mapping.outcome {
            case .deadLetter(let reason):
                print("route \(spec.name): dead letter")
                print("pushbridge-error: \(reason)")
                print(Self.carried(context: mapping.context, forwarded: forwarded, deadLetter: true), terminator: "")
                throw ExitCode(1)
            case .notifications(let notifications):
                print(
                    self.describe(
                        notifications, route: spec.name, app: mapping.app, coalesces: mapping.coalesces,
                        records: RecordsShown(
                            context: mapping.context, forwarded: forwarded, key: outcomes.key,
                            sourceKey: event.source.key)),
                    terminator: "")
                if notifications.contains(where: { Self.localRejection(of: $0) != nil }) {
                    throw ExitCode(1)
                }
            }
        }
    }

    /// `text` with control characters written as `\u{..}`: a header value from an event must not be able to
    /// fake lines of this output (the bridge itself never sends such a value: it is rejected above).
    static func visible(_ text: String) -> String {
        guard text.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) else {
            return text
        }
        var shown = ""
        for scalar in text.unicodeScalars {
            if scalar.properties.generalCategory == .control {
                shown += "\\u{\(String(scalar.value, radix: 16))}"
            } else {
                shown.unicodeScalars.append(scalar)
            }
        }
        return shown
    }

    /// The bytes of `--input`; exits with 2 when they cannot be read.
    func readInput() throws -> [UInt8] {
        if self.input == "-" {
            return Array(FileHandle.standardInput.readDataToEndOfFile())
        }
        guard let data = FileManager.default.contents(atPath: self.input) else {
            FileHandleOutput.standardError("pushbridge render: cannot read --input \(self.input)\n")
            throw ExitCode(2)
        }
        return Array(data)
    }

    /// The reason the bridge would reject `mapped` without sending it, exactly as `pushbridge run` decides:
    /// the route's own finding (an oversized payload), else Apple's rules as the APNs sender checks them before
    /// every request (`NotificationValidation.validate`, which the pipeline calls through the sender's
    /// `validate`): a malformed device token, a collapse id over 64 bytes, a header value APNs would refuse...
    static func localRejection(of mapped: MappedNotification) -> Reason? {
        mapped.localRejection ?? NotificationValidation.validate(mapped.notification)
    }

    /// Every request, as it would go on the wire, after what the records carry.
    func describe(
        _ notifications: [MappedNotification], route: String, app: String?, coalesces: Bool = false,
        records: RecordsShown = RecordsShown()
    ) -> String {
        let count = notifications.count
        var text = "route \(route) (app: \(app ?? "apns")): \(count) notification\(count == 1 ? "" : "s")\n"
        text += Self.carried(context: records.context, forwarded: records.forwarded, deadLetter: false)
        for mapped in notifications {
            let notification = mapped.notification
            if notification.isBroadcast {
                text += "\n# broadcast to a channel: \(notification.payload.count)-byte payload\n"
            } else {
                text += "\n# token \(mapped.tokenIndex): \(notification.payload.count)-byte payload\n"
            }
            if let key = mapped.orderingKey {
                // The line it is sent in (route, key, destination); with coalesce, a newer one may replace it.
                text += "# ordering key: \(Self.visible(String(decoding: key, as: UTF8.self)))"
                text +=
                    coalesces ? " (coalesce: a newer notification of this key may replace it while it waits)\n" : "\n"
            }
            if let key = records.keyLine(of: mapped) {
                text += key
            }
            if let rejection = Self.localRejection(of: mapped) {
                text += "# not sent: APNs would reject it with \(rejection.rawValue)"
                if rejection == .payloadTooLarge {
                    text += " (limit \(notification.maxPayloadBytes) bytes; rendering stops one byte past it)"
                }
                text += "; the outcome is rejected"
                if rejection.invalidatesToken && !notification.isBroadcast {
                    text += ", and the token is published as invalid"
                }
                text += "\n"
            }
            text += "POST \(Self.visible(notification.path)) HTTP/2\n"
            for header in notification.apnsHeaders {
                text += "\(header.name): \(Self.visible(header.value))\n"
            }
            text += "\n"
            if self.compact {
                text += String(decoding: notification.payload, as: UTF8.self) + "\n"
            } else if let payload = try? JSONValue(parsing: notification.payload) {
                text += payload.prettyText() + "\n"
            } else {
                text += String(decoding: notification.payload, as: UTF8.self) + "\n"
            }
        }
        return text
    }
}
