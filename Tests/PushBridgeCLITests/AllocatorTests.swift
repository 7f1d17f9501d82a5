import TestSupport
import Testing

/// `pushbridge` runs on jemalloc, not glibc's malloc (docs/operations.md, "Memory"; the CPU it saves is in
/// docs/benchmarks.md, "The allocator"). jemalloc prints its statistics at exit when `MALLOC_CONF` asks for them;
/// glibc ignores the variable, so a build that lost the library fails here.
@Suite("pushbridge is linked with jemalloc", .timeLimit(.minutes(1)))
struct AllocatorTests {
    @Test("MALLOC_CONF=stats_print:true makes the executable print jemalloc's statistics")
    func executableUsesJemalloc() async throws {
        let result = try await PushBridgeExecutable.run(["--help"], environment: ["MALLOC_CONF": "stats_print:true"])
        #expect(result.status == 0)
        #expect(
            result.standardError.contains("jemalloc statistics"), "stderr began: \(result.standardError.prefix(200))")
    }
}
