#if canImport(Glibc)
    import Glibc
#else
    import Darwin
#endif

/// The stand-alone driver of a fuzz target, used when it is built without libFuzzer (the normal debug build,
/// which `make fuzz-smoke` and so `make test` run): it replays every seed of the given corpus directories and
/// files, then runs a fixed number of seeded, deterministic mutations of them (bit flips, interesting bytes,
/// dictionary tokens, cuts, copies and splices). The same seed gives the same inputs, so a failure repeats.
///
/// A crash (a trap, a failed precondition, a fault) is caught by a signal handler that writes the input being
/// run to `--crash-dir` and prints its path, then lets the Swift runtime's handler print the backtrace. No
/// coverage guides the mutations: this is a regression run of the harness and its corpus, not a search. The
/// search is `make fuzz`, where the same `fuzzOne` function is libFuzzer's `LLVMFuzzerTestOneInput`.
///
/// Usage: `TARGET [--mutations N] [--seed S] [--max-len BYTES] [--dict FILE] [--crash-dir DIR] PATH...`
package enum FuzzDriver {
    /// Runs the driver with the process's arguments and exits: 0 when no input crashed.
    package static func main(target: String, _ fuzzOne: ([UInt8]) -> Void) -> Never {
        var options = Options()
        do {
            options = try Options(parsing: Array(CommandLine.arguments.dropFirst()))
        } catch {
            writeError("\(target): \(error.message)\n")
            writeError(
                "usage: \(target) [--mutations N] [--seed S] [--max-len BYTES] [--dict FILE] [--crash-dir DIR] "
                    + "PATH...\n"
            )
            exit(2)
        }
        var seeds: [[UInt8]] = []
        for path in options.paths {
            guard let files = inputFiles(at: path) else {
                writeError("\(target): cannot read \(path)\n")
                exit(2)
            }
            for file in files {
                guard let bytes = readFile(file) else {
                    writeError("\(target): cannot read \(file)\n")
                    exit(2)
                }
                seeds.append(bytes)
            }
        }
        var dictionary: [[UInt8]] = []
        if let dict = options.dictionary {
            guard let text = readFile(dict) else {
                writeError("\(target): cannot read the dictionary \(dict)\n")
                exit(2)
            }
            dictionary = parseDictionary(String(decoding: text, as: UTF8.self))
        }

        CrashCapture.install(path: "\(options.crashDirectory)/crash-\(target)", maximumBytes: options.maximumLength)
        let start = monotonicSeconds()
        for seed in seeds {
            CrashCapture.record(seed)
            fuzzOne(seed)
        }
        var mutator = Mutator(seed: options.seed, dictionary: dictionary, maximumLength: options.maximumLength)
        let pool = seeds.isEmpty ? [[]] : seeds
        for _ in 0..<options.mutations {
            let input = mutator.mutate(pool)
            CrashCapture.record(input)
            fuzzOne(input)
        }
        let seconds = monotonicSeconds() - start
        print(
            "\(target): \(seeds.count) seeds and \(options.mutations) mutations (seed \(options.seed)) ran without a "
                + "crash in \(Int(seconds * 1000)) ms"
        )
        exit(0)
    }

    struct UsageError: Error {
        var message: String
    }

    struct Options {
        var mutations = 10000
        var seed: UInt64 = 1
        var maximumLength = 4096
        var dictionary: String?
        var crashDirectory = "."
        var paths: [String] = []

        init() {}

        init(parsing arguments: [String]) throws(UsageError) {
            var index = 0
            func value(_ name: String) throws(UsageError) -> String {
                index += 1
                guard index < arguments.count else { throw UsageError(message: "\(name) needs a value") }
                return arguments[index]
            }
            while index < arguments.count {
                let argument = arguments[index]
                switch argument {
                case "--mutations":
                    guard let count = Int(try value(argument)), count >= 0 else {
                        throw UsageError(message: "--mutations needs a count")
                    }
                    self.mutations = count
                case "--seed":
                    guard let seed = UInt64(try value(argument)) else {
                        throw UsageError(message: "--seed needs a number")
                    }
                    self.seed = seed
                case "--max-len":
                    guard let length = Int(try value(argument)), length > 0 else {
                        throw UsageError(message: "--max-len needs a positive byte count")
                    }
                    self.maximumLength = length
                case "--dict":
                    self.dictionary = try value(argument)
                case "--crash-dir":
                    self.crashDirectory = try value(argument)
                default:
                    guard !argument.hasPrefix("-") else { throw UsageError(message: "unknown option \(argument)") }
                    self.paths.append(argument)
                }
                index += 1
            }
        }
    }

    /// The regular files at `path`: itself, or the files directly inside it, sorted by name.
    static func inputFiles(at path: String) -> [String]? {
        var status = stat()
        guard stat(path, &status) == 0 else { return nil }
        guard status.st_mode & S_IFMT == S_IFDIR else { return [path] }
        guard let directory = opendir(path) else { return nil }
        defer { closedir(directory) }
        var names: [String] = []
        while let entry = readdir(directory) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(decoding: raw.prefix(while: { $0 != 0 }), as: UTF8.self)
            }
            if name.hasPrefix(".") { continue }
            var child = stat()
            let full = "\(path)/\(name)"
            if stat(full, &child) == 0, child.st_mode & S_IFMT == S_IFREG { names.append(full) }
        }
        return names.sorted()
    }

    static func readFile(_ path: String) -> [UInt8]? {
        guard let file = fopen(path, "rb") else { return nil }
        defer { fclose(file) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            let count = chunk.withUnsafeMutableBytes { fread($0.baseAddress, 1, $0.count, file) }
            if count == 0 { break }
            bytes.append(contentsOf: chunk[0..<count])
        }
        return ferror(file) == 0 ? bytes : nil
    }

    /// Tokens of a libFuzzer dictionary (`name="value"` or `"value"` per line, `\\`, `\"` and `\xNN` escapes).
    static func parseDictionary(_ text: String) -> [[UInt8]] {
        var tokens: [[UInt8]] = []
        for line in text.split(separator: "\n") {
            let trimmed = line.drop(while: { $0 == " " || $0 == "\t" })
            guard !trimmed.hasPrefix("#"), let open = trimmed.firstIndex(of: "\""),
                let close = trimmed.lastIndex(of: "\""), open < close
            else { continue }
            let body = Array(trimmed[trimmed.index(after: open)..<close].utf8)
            var token: [UInt8] = []
            var index = 0
            while index < body.count {
                if body[index] == UInt8(ascii: "\\"), index + 1 < body.count {
                    if body[index + 1] == UInt8(ascii: "x"), index + 3 < body.count,
                        let value = UInt8(String(decoding: body[(index + 2)...(index + 3)], as: UTF8.self), radix: 16)
                    {
                        token.append(value)
                        index += 4
                        continue
                    }
                    token.append(body[index + 1])
                    index += 2
                    continue
                }
                token.append(body[index])
                index += 1
            }
            if !token.isEmpty { tokens.append(token) }
        }
        return tokens
    }

    static func monotonicSeconds() -> Double {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC, &time)
        return Double(time.tv_sec) + Double(time.tv_nsec) / 1e9
    }

    static func writeError(_ text: String) {
        var text = text
        text.withUTF8 { _ = write(2, $0.baseAddress, $0.count) }
    }
}

/// Mutations in the manner of libFuzzer's, driven by a seeded generator.
struct Mutator {
    private var state: UInt64
    private let dictionary: [[UInt8]]
    private let maximumLength: Int

    init(seed: UInt64, dictionary: [[UInt8]], maximumLength: Int) {
        self.state = seed
        self.dictionary = dictionary
        self.maximumLength = maximumLength
    }

    /// SplitMix64.
    mutating func next() -> UInt64 {
        self.state &+= 0x9E37_79B9_7F4A_7C15
        var z = self.state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    private mutating func below(_ bound: Int) -> Int {
        bound <= 1 ? 0 : Int(self.next() % UInt64(bound))
    }

    private static let interesting: [UInt8] = [0, 1, 0x7F, 0x80, 0xFF, 0x0A, 0x0D, 0x22, 0x5C, 0x7B, 0x7D, 0x5B, 0x5D]

    /// A mutation of one input of `pool` (one to four steps).
    mutating func mutate(_ pool: [[UInt8]]) -> [UInt8] {
        var bytes = pool[self.below(pool.count)]
        for _ in 0...self.below(4) {
            switch self.below(self.dictionary.isEmpty ? 8 : 10) {
            case 0 where !bytes.isEmpty:
                let index = self.below(bytes.count)
                bytes[index] ^= UInt8(1) << UInt8(self.below(8))
            case 1 where !bytes.isEmpty:
                bytes[self.below(bytes.count)] = Self.interesting[self.below(Self.interesting.count)]
            case 2:
                let count = 1 + self.below(8)
                let values = (0..<count).map { _ in UInt8(truncatingIfNeeded: self.next()) }
                bytes.insert(contentsOf: values, at: self.below(bytes.count + 1))
            case 3 where !bytes.isEmpty:
                let start = self.below(bytes.count)
                let end = min(bytes.count, start + 1 + self.below(16))
                bytes.removeSubrange(start..<end)
            case 4 where !bytes.isEmpty:
                let start = self.below(bytes.count)
                let end = min(bytes.count, start + 1 + self.below(64))
                let copy = Array(bytes[start..<end])
                bytes.insert(contentsOf: copy, at: self.below(bytes.count + 1))
            case 5:
                let other = pool[self.below(pool.count)]
                if !other.isEmpty {
                    let start = self.below(other.count)
                    let end = min(other.count, start + 1 + self.below(256))
                    bytes.insert(contentsOf: other[start..<end], at: self.below(bytes.count + 1))
                }
            case 6 where bytes.count > 1:
                bytes.removeSubrange(self.below(bytes.count)...)
            case 7 where !bytes.isEmpty:
                let index = self.below(bytes.count)
                if let digit = (UInt8(ascii: "0")...UInt8(ascii: "9")).randomElement(using: &self) {
                    bytes.insert(contentsOf: [UInt8](repeating: digit, count: 1 + self.below(32)), at: index)
                }
            case 8, 9:
                let token = self.dictionary[self.below(self.dictionary.count)]
                if self.below(2) == 0 || bytes.isEmpty {
                    bytes.insert(contentsOf: token, at: self.below(bytes.count + 1))
                } else {
                    let start = self.below(bytes.count)
                    let end = min(bytes.count, start + token.count)
                    bytes.replaceSubrange(start..<end, with: token)
                }
            default:
                break
            }
        }
        if bytes.count > self.maximumLength { bytes.removeSubrange(self.maximumLength...) }
        return bytes
    }
}

extension Mutator: RandomNumberGenerator {}

/// Writes the input being run to a file when the process dies of a signal, from the signal handler, with
/// async-signal-safe calls only, into memory allocated up front.
enum CrashCapture {
    // The handler can only reach globals. They are written by the one thread running inputs, before each input,
    // and read by the handler on that thread when that input crashes: never concurrently.
    nonisolated(unsafe) private static var buffer: UnsafeMutableBufferPointer<UInt8> = .init(start: nil, count: 0)
    nonisolated(unsafe) private static var count = 0
    nonisolated(unsafe) private static var path: UnsafeMutablePointer<CChar>?
    #if os(Linux)
        /// The actions the signals had before, indexed by signal number.
        nonisolated(unsafe) private static var previous = UnsafeMutablePointer<sigaction>.allocate(capacity: 65)
        private static let signals: [Int32] = [SIGILL, SIGTRAP, SIGSEGV, SIGBUS, SIGABRT, SIGFPE]
    #endif

    static func install(path: String, maximumBytes: Int) {
        self.buffer = .allocate(capacity: max(maximumBytes, 1 << 20))
        self.path = strdup(path)
        #if os(Linux)
            for signal in self.signals {
                var action = sigaction()
                action.__sigaction_handler.sa_handler = { signal in CrashCapture.handle(signal) }
                sigemptyset(&action.sa_mask)
                sigaction(signal, &action, self.previous + Int(signal))
            }
        #endif
    }

    static func record(_ input: [UInt8]) {
        let count = min(input.count, self.buffer.count)
        _ = UnsafeMutableBufferPointer(rebasing: self.buffer[..<count]).initialize(from: input.prefix(count))
        self.count = count
    }

    #if os(Linux)
        private static func handle(_ signal: Int32) {
            if let path = self.path {
                let file = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
                if file >= 0 {
                    _ = write(file, self.buffer.baseAddress, self.count)
                    close(file)
                }
                let prefix: StaticString = "\n==fuzz== the input that crashed is in "
                _ = write(2, prefix.utf8Start, prefix.utf8CodeUnitCount)
                _ = write(2, path, strlen(path))
                _ = write(2, "\n", 1)
            }
            // Hand the signal to whoever had it before (the Swift runtime's backtracer, or the default action): it
            // is blocked while this handler runs, so it is delivered again as soon as the handler returns.
            sigaction(signal, self.previous + Int(signal), nil)
            raise(signal)
        }
    #endif
}

/// Named checks of the harnesses that a run may skip: `FUZZ_SKIP_CHECKS` lists them, separated by commas or
/// spaces. The checks of behaviour an open issue asks for but that is not built yet are skipped by
/// `make fuzz-smoke` (so that `make test` stays green meanwhile) and never by `make fuzz` (mk/fuzz.mk).
package enum FuzzChecks {
    /// The names listed in `FUZZ_SKIP_CHECKS`, read once.
    package static let skipped: Set<String> = {
        guard let value = getenv("FUZZ_SKIP_CHECKS") else { return [] }
        let text = String(cString: value)
        return Set(text.split(whereSeparator: { $0 == "," || $0 == " " }).map(String.init))
    }()

    /// Whether the check `name` runs.
    package static func enabled(_ name: String) -> Bool {
        !self.skipped.contains(name)
    }
}
