/// The request headers the simulator checks, found in one pass over the header list (the checks used to search
/// the list once per header and build a set of names for the duplicate check, on every request).
struct SimulatorRequestFields {
    var authorization: String?
    var pushType: String?
    var topic: String?
    var priority: String?
    var expiration: String?
    var messageID: String?
    var collapseID: String?
    /// `apns-channel-id` (broadcast sends and channel management).
    var channelID: String?
    /// `apns-request-id` (broadcast sends and channel management).
    var requestID: String?
    /// An `apns-*` or `authorization` header appears more than once (APNs: `DuplicateHeaders`).
    var hasDuplicates = false

    /// Reads `headers`; where a name repeats, the first value counts, as a lookup of the first match did.
    init(_ headers: [(name: String, value: String)]) {
        // `apns-*` names the simulator does not read still count as duplicates; they are rare, so a small list.
        var otherAPNSNames: [String] = []
        // Every name read here starts with "a" (HTTP/2 names are lower case); the others are passed by one byte.
        for (name, value) in headers where name.utf8.first == UInt8(ascii: "a") {
            switch name {
            case "authorization": Self.take(value, into: &self.authorization, duplicates: &self.hasDuplicates)
            case "apns-push-type": Self.take(value, into: &self.pushType, duplicates: &self.hasDuplicates)
            case "apns-topic": Self.take(value, into: &self.topic, duplicates: &self.hasDuplicates)
            case "apns-priority": Self.take(value, into: &self.priority, duplicates: &self.hasDuplicates)
            case "apns-expiration": Self.take(value, into: &self.expiration, duplicates: &self.hasDuplicates)
            case "apns-id": Self.take(value, into: &self.messageID, duplicates: &self.hasDuplicates)
            case "apns-collapse-id": Self.take(value, into: &self.collapseID, duplicates: &self.hasDuplicates)
            case "apns-channel-id": Self.take(value, into: &self.channelID, duplicates: &self.hasDuplicates)
            case "apns-request-id": Self.take(value, into: &self.requestID, duplicates: &self.hasDuplicates)
            default:
                guard name.hasPrefix("apns-") else { continue }
                if otherAPNSNames.contains(name) {
                    self.hasDuplicates = true
                } else {
                    otherAPNSNames.append(name)
                }
            }
        }
    }

    private static func take(_ value: String, into field: inout String?, duplicates: inout Bool) {
        if field == nil {
            field = value
        } else {
            duplicates = true
        }
    }
}
