import Logging

/// `logging.format: text`: swift-log's `StreamLogHandler` lines on standard error (`<time> <level> <label>:
/// <metadata> [<module>] <message>`), with the error passed to the log call as the same two metadata fields the
/// JSON format has, `error.type` and `error.message` (``LoggedError``). `StreamLogHandler` alone would name the
/// type with its module (`Kafka.KafkaError`), so the two formats would disagree.
package struct TextLogHandler: LogHandler {
    private var stream: StreamLogHandler

    /// A handler for `label` at `level`, writing to standard error.
    package init(label: String, level: Logger.Level) {
        var stream = StreamLogHandler.standardError(label: label)
        stream.logLevel = level
        self.init(stream)
    }

    /// A handler that writes through `stream` (tests give it a stream of their own).
    init(_ stream: StreamLogHandler) {
        self.stream = stream
    }

    package var logLevel: Logger.Level {
        get { self.stream.logLevel }
        set { self.stream.logLevel = newValue }
    }

    package var metadata: Logger.Metadata {
        get { self.stream.metadata }
        set { self.stream.metadata = newValue }
    }

    package var metadataProvider: Logger.MetadataProvider? {
        get { self.stream.metadataProvider }
        set { self.stream.metadataProvider = newValue }
    }

    package subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { self.stream[metadataKey: key] }
        set { self.stream[metadataKey: key] = newValue }
    }

    package func log(event: LogEvent) {
        guard let error = event.error else {
            self.stream.log(event: event)
            return
        }
        var event = event
        event.metadata = LoggedError.adding(error, to: event.metadata ?? [:])
        event.error = nil
        self.stream.log(event: event)
    }
}
