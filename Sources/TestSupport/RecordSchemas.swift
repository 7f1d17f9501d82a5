import Foundation

/// Checks records against the JSON Schemas in `schemas/` with `scripts/validate-records.py` (Python's
/// jsonschema, installed by `make test`), so the schemas users read and the records the bridge writes cannot
/// drift apart.
package enum RecordSchemas {
    /// A schema file name under `schemas/`.
    package enum Schema: String, Sendable {
        case outcome = "outcome.v1.schema.json"
        case outcomeV2 = "outcome.v2.schema.json"
        case invalidToken = "invalid-token.v1.schema.json"
        case invalidTokenV2 = "invalid-token.v2.schema.json"
        case outcomeV3 = "outcome.v3.schema.json"
        case invalidTokenV3 = "invalid-token.v3.schema.json"
        case deadLetterHeaders = "dead-letter-headers.v1.schema.json"
        case deadLetterHeadersV2 = "dead-letter-headers.v2.schema.json"
    }

    /// The validator's verdict: the problems it printed, one per line; empty when every record is valid.
    package struct Report: Sendable {
        package var problems: [String]
        package var exitStatus: Int32
    }

    /// Validates `records` (each a JSON document) against their schemas.
    package static func validate(_ records: [(Schema, [UInt8])]) async throws -> Report {
        // The project's virtual environment (scripts/lint-deploy.sh, which `make test` runs first) has jsonschema;
        // the system Python need not.
        let venvPython = RepositoryPaths.root.appendingPathComponent(".build-lint/venv/bin/python")
        let script = RepositoryPaths.root.appendingPathComponent("scripts/validate-records.py").path
        let (executable, arguments) =
            FileManager.default.isExecutableFile(atPath: venvPython.path)
            ? (venvPython, [script]) : (URL(fileURLWithPath: "/usr/bin/env"), ["python3", script])
        var text = Data()
        for (schema, json) in records {
            text.append(contentsOf: Array(schema.rawValue.utf8))
            text.append(UInt8(ascii: "\t"))
            text.append(contentsOf: json.filter { $0 != UInt8(ascii: "\n") })
            text.append(UInt8(ascii: "\n"))
        }
        let result = try await Subprocess.run(executable, arguments, input: text)
        let problems = String(decoding: result.output, as: UTF8.self).split(separator: "\n").map(String.init)
        return Report(problems: problems, exitStatus: result.status)
    }
}

/// Paths inside the repository, found from this source file's location.
package enum RepositoryPaths {
    /// The repository's root directory.
    package static var root: URL {
        URL(fileURLWithPath: #filePath)
            .deletingLastPathComponent()  // TestSupport
            .deletingLastPathComponent()  // Sources
            .deletingLastPathComponent()
    }
}
