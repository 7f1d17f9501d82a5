import Crypto
import Foundation
import Yams

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// What tells one version of a file from another without reading it: the path symlinks resolve to, and that file's
/// device, inode, size and modification time.
///
/// Kubernetes updates a mounted Secret or ConfigMap by writing the new files into a new directory and renaming the
/// `..data` symlink onto it: the path as configured never changes, its target does. `stat` follows the symlinks, so
/// the new target shows as a new inode (and resolved path) even when its size and modification time equal the old
/// one's.
package struct FileIdentity: Sendable, Hashable, CustomStringConvertible {
    /// The path with every symlink resolved.
    package var resolvedPath: String
    /// `st_dev`.
    package var device: UInt64
    /// `st_ino`.
    package var inode: UInt64
    /// `st_size`, in bytes.
    package var sizeBytes: Int64
    /// `st_mtim`, in nanoseconds since the epoch.
    package var modifiedNanoseconds: Int64

    /// Creates an identity from its parts.
    package init(resolvedPath: String, device: UInt64, inode: UInt64, sizeBytes: Int64, modifiedNanoseconds: Int64) {
        self.resolvedPath = resolvedPath
        self.device = device
        self.inode = inode
        self.sizeBytes = sizeBytes
        self.modifiedNanoseconds = modifiedNanoseconds
    }

    /// The identity of the file at `path` now; `nil` when it does not exist or cannot be examined.
    package static func of(path: String) -> FileIdentity? {
        guard let resolved = realpath(path, nil) else { return nil }
        defer { free(resolved) }
        var status = stat()
        guard stat(resolved, &status) == 0 else { return nil }
        #if canImport(Darwin)
            let modified = status.st_mtimespec
        #else
            let modified = status.st_mtim
        #endif
        let seconds = Int64(modified.tv_sec)
        let (scaled, overflow) = seconds.multipliedReportingOverflow(by: 1_000_000_000)
        return FileIdentity(
            resolvedPath: String(cString: resolved),
            device: UInt64(status.st_dev),
            inode: UInt64(status.st_ino),
            sizeBytes: Int64(status.st_size),
            modifiedNanoseconds: overflow ? .max : scaled &+ Int64(modified.tv_nsec)
        )
    }

    package var description: String {
        "\(self.resolvedPath) (dev \(self.device), inode \(self.inode), \(self.sizeBytes) bytes, mtime \(self.modifiedNanoseconds) ns)"
    }
}

/// The configuration file and every file it names (credentials, CA files, secrets given as `*_file`): what
/// `pushbridge run` watches for a reload (docs/configuration.md, "Reloading").
package struct ConfigurationFiles: Sendable, Hashable {
    /// The configuration file, as given.
    package var configurationFile: String
    /// The files it names, as named (after `${VAR}` expansion), each once, in file order.
    package var namedFiles: [String]

    /// Every watched path: the configuration file first.
    package var paths: [String] { [self.configurationFile] + self.namedFiles }

    /// Creates the set from its parts.
    package init(configurationFile: String, namedFiles: [String]) {
        self.configurationFile = configurationFile
        self.namedFiles = namedFiles
    }

    /// The files `yaml` (the configuration file `file`) names: the value of every key ending in `_file`, anywhere in
    /// the document, with `${VAR}` expanded from `environment` (values that do not expand name nothing; the loader
    /// reports them). `nil` when the document does not parse.
    package static func named(
        inYAML yaml: String, file: String, environment: [String: String]
    ) -> ConfigurationFiles? {
        let document: Node?
        do {
            document = try Yams.compose(yaml: yaml)
        } catch {
            return nil
        }
        var named: [String] = []
        if let root = document {
            Self.collect(root, into: &named, expansion: EnvironmentExpansion(environment: environment))
        }
        var seen = Set<String>()
        return ConfigurationFiles(configurationFile: file, namedFiles: named.filter { seen.insert($0).inserted })
    }

    private static func collect(_ node: Node, into paths: inout [String], expansion: EnvironmentExpansion) {
        switch node {
        case .mapping(let mapping):
            for (key, value) in mapping {
                if case .scalar(let name) = key, name.string.hasSuffix("_file"), case .scalar(let scalar) = value,
                    let path = try? expansion.expand(scalar.string).text, !path.isEmpty
                {
                    paths.append(path)
                } else {
                    Self.collect(value, into: &paths, expansion: expansion)
                }
            }
        case .sequence(let sequence):
            for element in sequence { Self.collect(element, into: &paths, expansion: expansion) }
        case .scalar:
            break
        }
    }

    /// The identity of every watched file now; a file that does not exist is left out.
    package func identities() -> [String: FileIdentity] {
        var identities: [String: FileIdentity] = [:]
        for path in self.paths {
            identities[path] = FileIdentity.of(path: path)
        }
        return identities
    }
}

/// One reading of the configuration file, for `pushbridge run` and each reload: its text and fingerprint, the files
/// it names, and the identity of each, taken before it was read. Whatever changes after that shows at the next poll,
/// even when it changed while the configuration was being loaded.
package struct ConfigurationReading: Sendable {
    /// The configuration file and the files it names (when it does not parse: the `fallback` given to ``read``).
    package var files: ConfigurationFiles
    /// The identity of each of ``files`` before it was read.
    package var identities: [String: FileIdentity]
    /// The file's text; `nil` when it could not be read (``ConfigurationLoader/load(file:)`` then says why).
    package var text: String?
    /// ``ConfigurationHash`` of the file's bytes; `nil` when it could not be read.
    package var hash: String?

    /// Reads the configuration file `path`, expanding `${VAR}` in the paths it names from `environment`. When it
    /// cannot be read or does not parse, the files it names are taken from `fallback` (the running configuration's).
    package static func read(
        file path: String, environment: [String: String], fallback: ConfigurationFiles? = nil
    ) -> ConfigurationReading {
        var identities: [String: FileIdentity] = [:]
        identities[path] = FileIdentity.of(path: path)
        let bytes = FileManager.default.contents(atPath: path)
        let text = bytes.map { String(decoding: $0, as: UTF8.self) }
        let files =
            text.flatMap { ConfigurationFiles.named(inYAML: $0, file: path, environment: environment) }
            ?? ConfigurationFiles(configurationFile: path, namedFiles: fallback?.namedFiles ?? [])
        for named in files.namedFiles {
            identities[named] = FileIdentity.of(path: named)
        }
        return ConfigurationReading(
            files: files, identities: identities, text: text, hash: bytes.map { ConfigurationHash.of($0) })
    }

    /// Loads what was read with `loader`, like ``ConfigurationLoader/load(file:)``.
    package func load(with loader: ConfigurationLoader) throws(ConfigurationErrors) -> LoadedConfiguration {
        guard let text = self.text else { return try loader.load(file: self.files.configurationFile) }
        return try loader.load(yaml: text, file: self.files.configurationFile)
    }
}

/// The configuration's fingerprint in `pushbridge_config_info{hash}` and the reload log lines: the first 12 hex
/// digits of the SHA-256 of the file's bytes, as `sha256sum FILE | cut -c1-12` prints it.
package enum ConfigurationHash {
    /// The fingerprint of `bytes`.
    package static func of(_ bytes: some DataProtocol) -> String {
        SHA256.hash(data: bytes).prefix(6).map { byte in
            let text = String(byte, radix: 16)
            return byte < 16 ? "0" + text : text
        }.joined()
    }
}

/// Decides, from one snapshot of the watched files per poll, when they changed for good: a snapshot that differs
/// from what was last loaded must be seen again, unchanged, at the next poll before a reload starts. So a file
/// written in several steps, or several files updated one after the other, reload once, after the last step; and a
/// Kubernetes volume update (one rename) reloads once, one poll after it was seen.
package struct FileChangeDetector: Sendable, Hashable {
    /// The snapshot the running configuration was loaded from (or whose reload was refused).
    package private(set) var baseline: [String: FileIdentity]
    /// A different snapshot seen at the last poll, waiting to be seen again.
    private var pending: [String: FileIdentity]?

    /// A detector that considers `baseline` loaded.
    package init(baseline: [String: FileIdentity]) {
        self.baseline = baseline
    }

    /// Takes one poll's snapshot; returns `true` when a reload should start now. The caller then reloads and calls
    /// ``loaded(_:)`` with the snapshot it took before reading the files.
    package mutating func observe(_ snapshot: [String: FileIdentity]) -> Bool {
        if snapshot == self.baseline {
            self.pending = nil
            return false
        }
        if snapshot == self.pending {
            self.pending = nil
            return true
        }
        self.pending = snapshot
        return false
    }

    /// A reload read the files as `snapshot` (whatever its result): later polls compare with it.
    package mutating func loaded(_ snapshot: [String: FileIdentity]) {
        self.baseline = snapshot
        self.pending = nil
    }
}
