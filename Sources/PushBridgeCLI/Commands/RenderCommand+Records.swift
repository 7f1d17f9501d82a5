import APNSCore
import Routing

// What `pushbridge render` shows of the records an event's notifications make, besides the requests: the route's
// context, the forwarded headers, and the record key when `outcomes.key` is not the device token.

extension RenderCommand {
    /// What the records of the rendered event carry, as `pushbridge run` would write them.
    struct RecordsShown {
        /// The route's rendered context; `nil` when it has none.
        var context: RecordContext?
        /// The event's forwarded headers; `nil` when `outcomes.forward_headers` is empty.
        var forwarded: HeaderForwarding.Selection?
        /// `outcomes.key`.
        var key: OutcomeKey = .deviceToken
        /// The event's key (`--key`).
        var sourceKey: [UInt8]?

        /// `# record key (outcomes.key: …): …` for one notification; `nil` for the default key, the device token,
        /// which the request line shows already.
        func keyLine(of mapped: MappedNotification) -> String? {
            let key: [UInt8]?
            switch self.key {
            case .deviceToken: return nil
            case .sourceKey: key = self.sourceKey.map { Array($0.prefix(OutcomeKey.maximumSourceKeyBytes)) }
            case .notificationID: key = Array(mapped.notification.apnsID.utf8)
            case .context(let name): key = self.context?.key(named: name)
            }
            let shown = key.map { RenderCommand.visible(String(decoding: $0, as: UTF8.self)) } ?? "none (a null key)"
            return "# record key (outcomes.key: \(self.key)): \(shown)\n"
        }
    }

    /// The lines saying what every record of the event carries: the context object (and why an entry is null),
    /// the forwarded headers and those too large to forward. Empty when the route has no context and nothing is
    /// forwarded.
    static func carried(context: RecordContext?, forwarded: HeaderForwarding.Selection?, deadLetter: Bool) -> String {
        var text = ""
        if let context {
            let carrier =
                deadLetter
                ? "the dead letter's header \(RecordContext.deadLetterHeader)"
                : "every outcome and invalid-token record"
            text += "# context (in \(carrier)): \(String(decoding: context.json, as: UTF8.self))\n"
            for field in context.fields {
                guard let reason = field.nullReason else { continue }
                text += "#   context.\(field.name) is null: \(Self.visible(reason))\n"
            }
        }
        guard let forwarded else { return text }
        let carrier =
            deadLetter
            ? "the dead letter keeps them, even when it is cut to fit Kafka"
            : "on every outcome and invalid-token record"
        if forwarded.forwarded.isEmpty && forwarded.dropped.isEmpty {
            return text + "# forwarded headers: none (the event has none of outcomes.forward_headers)\n"
        }
        text += "# forwarded headers (\(carrier)):\n"
        for (name, value) in forwarded.forwarded {
            let shown = value.map { Self.visible(Self.text(of: $0)) } ?? "(null header)"
            text += "#   \(name): \(shown)\n"
        }
        if !forwarded.dropped.isEmpty {
            text += "#   not forwarded, larger than \(HeaderForwarding.maximumValueBytes) bytes: "
            text += forwarded.dropped.joined(separator: ", ")
            text += " (named in \(HeaderForwarding.droppedHeader))\n"
        }
        return text
    }

    /// A header value as text: UTF-8 as it is, other bytes as `\xNN`, so the output shows the exact bytes.
    private static func text(of bytes: [UInt8]) -> String {
        var text = ""
        var rest = bytes[...]
        while !rest.isEmpty {
            var iterator = rest.makeIterator()
            var decoder = UTF8()
            let start = rest.startIndex
            switch decoder.decode(&iterator) {
            case .scalarValue(let scalar):
                text.unicodeScalars.append(scalar)
                rest = rest.dropFirst(UTF8.width(scalar))
            case .error, .emptyInput:
                let hex = String(rest[start], radix: 16, uppercase: true)
                text += "\\x" + (hex.count == 1 ? "0" + hex : hex)
                rest = rest.dropFirst()
            }
        }
        return text
    }
}
