import Foundation
import Testing

/// `pushbridge` runs on jemalloc, not glibc's malloc (docs/operations.md, "Memory"; the CPU it saves is in
/// docs/benchmarks.md, "The allocator"). jemalloc prints its statistics at exit when `MALLOC_CONF` asks for them;
/// glibc ignores the variable, so a build that lost the library fails here.
@Suite("pushbridge is linked with jemalloc", .timeLimit(.minutes(1)))
struct AllocatorTests {
    static let executable = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent(".build/debug/pushbridge").path

    @Test("MALLOC_CONF=stats_print:true makes the executable print jemalloc's statistics")
    func executableUsesJemalloc() throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: Self.executable)
        process.arguments = ["--help"]
        var environment = ProcessInfo.processInfo.environment
        environment["MALLOC_CONF"] = "stats_print:true"
        process.environment = environment
        let errors = Pipe()
        process.standardError = errors
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        let text = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        #expect(process.terminationStatus == 0)
        #expect(text.contains("jemalloc statistics"), "stderr began: \(text.prefix(200))")
    }
}
