import BridgeCore
import Logging
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// `logging.format: json`: one JSON object per line on standard error, with the constant message, the level,
/// the label, an RFC 3339 timestamp, the error passed to the log call as `error.type` and `error.message`
/// (``LoggedError``) and the metadata as string fields (docs/operations.md).
package struct JSONLogHandler: LogHandler {
    /// The logger's label (`pushbridge.kafka`, ...).
    package let label: String
    package var logLevel: Logger.Level
    package var metadata: Logger.Metadata = [:]
    package var metadataProvider: Logger.MetadataProvider?

    /// Creates a handler for `label` at `level`.
    package init(label: String, level: Logger.Level, metadataProvider: Logger.MetadataProvider? = nil) {
        self.label = label
        self.logLevel = level
        self.metadataProvider = metadataProvider
    }

    package subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { self.metadata[key] }
        set { self.metadata[key] = newValue }
    }

    package func log(event: LogEvent) {
        var line = Self.line(
            epochMilliseconds: Pipeline.systemEpochMilliseconds(),
            level: event.level,
            label: self.label,
            message: "\(event.message)",
            metadata: self.merged(event.metadata),
            error: event.error
        )
        line.append(UInt8(ascii: "\n"))
        line.withUnsafeBytes { bytes in
            _ = write(2, bytes.baseAddress, bytes.count)
        }
    }

    private func merged(_ explicit: Logger.Metadata?) -> Logger.Metadata {
        var all = self.metadata
        if let provided = self.metadataProvider?.get() { all.merge(provided) { _, new in new } }
        if let explicit { all.merge(explicit) { _, new in new } }
        return all
    }

    /// One log line as UTF-8 JSON (without the newline); keys in a fixed order, metadata keys sorted. The error's
    /// two fields come before the metadata and replace metadata of the same names.
    static func line(
        epochMilliseconds: Int64, level: Logger.Level, label: String, message: String, metadata: Logger.Metadata,
        error: (any Error)? = nil
    ) -> [UInt8] {
        var json = JSONWriter(reservingCapacity: 256)
        json.beginObject()
        json.key("ts")
        json.timestamp(epochMilliseconds: epochMilliseconds)
        json.key("level")
        json.string(level.rawValue)
        json.key("label")
        json.string(label)
        json.key("message")
        json.string(message)
        var metadata = metadata
        if let error {
            json.key(escaping: LoggedError.typeKey)
            json.string(LoggedError.typeName(of: error))
            json.key(escaping: LoggedError.messageKey)
            json.string(LoggedError.message(of: error))
            metadata[LoggedError.typeKey] = nil
            metadata[LoggedError.messageKey] = nil
        }
        for (key, value) in metadata.sorted(by: { $0.key < $1.key }) {
            json.key(escaping: key)
            json.string("\(value)")
        }
        json.endObject()
        return json.bytes
    }
}
