// Fuzz target: the configuration loader. The input is the YAML text of a configuration file (bytes that are not
// UTF-8 are replaced, as `ConfigurationLoader.load(file:)` does).
//
// The loader gets a fixed environment (never the process's) and does not check credential files, so it reads no
// file at all. A configuration either loads or fails with problems that are formatted as `pushbridge validate`
// prints them; no problem shows the value of the secret the environment holds (the check `secret-in-problem`,
// issue 11, item 9).
//
// Nothing outlives one input: every input makes its own loader.

import Configuration
import FuzzSupport
import Routing

/// A secret value the environment holds; configurations reference it as `${SECRET}`.
let secret = "Hunter2SecretValue"

let environment = [
    "SECRET": secret,
    "EMPTY": "",
    "BROKERS": "broker-1:9092,broker-2:9092",
    "TIMEOUT": "10s",
]

func fuzzOne(_ bytes: [UInt8]) {
    let loader = ConfigurationLoader(environment: environment, checksCredentialFiles: false)
    do {
        let loaded = try loader.load(yaml: String(decoding: bytes, as: UTF8.self), file: "fuzz.yaml")
        _ = loaded.router.inputTopics
    } catch {
        for problem in error.problems {
            let text = problem.description
            if FuzzChecks.enabled("secret-in-problem") {
                precondition(!text.contains(secret), "a configuration problem shows the secret: \(text)")
            }
        }
    }
}

#if PUSHBRIDGE_LIBFUZZER
    @_cdecl("LLVMFuzzerTestOneInput")
    public func fuzzerTestOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
        fuzzOne(size == 0 ? [] : Array(UnsafeBufferPointer(start: data, count: size)))
        return 0
    }
#else
    @main
    struct FuzzConfigurationMain {
        static func main() {
            FuzzDriver.main(target: "FuzzConfiguration", fuzzOne)
        }
    }
#endif
