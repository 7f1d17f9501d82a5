import Logging

/// How an error passed to a log call (swift-log's `error:` parameter) appears in a log line, in both formats: two
/// fields, `error.type` and `error.message` (docs/operations.md, "Logs").
package enum LoggedError {
    /// The field naming the error's type.
    package static let typeKey = "error.type"
    /// The field holding the error's description.
    package static let messageKey = "error.message"

    /// The error's type as declared in its module, without the module: `KafkaError`, `BridgeRuntime.Failure`,
    /// `CancellationError`. Without the module, since the type names of this project's errors say where they come
    /// from; with the enclosing types, since a bare `Failure` would not. A type declared `private` or `fileprivate`
    /// carries no `(unknown context at $…)` marker, whose address changes from build to build and would break a
    /// log query. Generic arguments keep their modules.
    package static func typeName(of error: any Error) -> String {
        var name = Substring(String(reflecting: type(of: error)))
        // The module is everything before the first dot, when that is a plain identifier.
        if let dot = name.firstIndex(of: "."), !name[..<dot].contains(where: { "<(, ".contains($0) }) {
            name = name[name.index(after: dot)...]
        }
        var result = ""
        while let start = name.firstRange(of: "(unknown context at "),
            let close = name[start.upperBound...].firstIndex(of: ")")
        {
            result += name[..<start.lowerBound]
            name = name[name.index(after: close)...]
            if name.first == "." { name = name.dropFirst() }
        }
        result += name
        return result
    }

    /// The error's description, as `"\(error)"` prints it: the text the log lines showed before they had these
    /// fields. The errors the project logs describe themselves without keys, passwords or device tokens.
    package static func message(of error: any Error) -> String {
        "\(error)"
    }

    /// `metadata` with the two fields of `error` added (replacing any metadata of the same names).
    static func adding(_ error: any Error, to metadata: Logger.Metadata) -> Logger.Metadata {
        var metadata = metadata
        metadata[Self.typeKey] = .string(Self.typeName(of: error))
        metadata[Self.messageKey] = .string(Self.message(of: error))
        return metadata
    }
}
