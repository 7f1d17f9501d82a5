import Testing

@testable import BridgeCore

@Suite("Partition table")
struct PartitionTableTests {
    private let p0 = PartitionID(topic: "in", partition: 0)

    @Test("an event of an older generation is stale; a newer one starts its assignment's state afresh")
    func generations() {
        var table = PartitionTable()
        #expect(
            table.withState(for: self.p0, generation: 2) { $0.progress.begin(offset: 5, pieces: 1, at: .now) } == true)
        #expect(table.withState(for: self.p0, generation: 1) { _ in true } == nil, "older: stale")
        #expect(table.partitions[self.p0]?.progress.unfinishedCount == 1)
        #expect(table.withState(for: self.p0, generation: 3) { $0.progress.unfinishedCount } == 0, "newer: fresh")
        #expect(table.withCurrentState(of: self.p0, generation: 2) { _ in true } == nil, "generation 2 is gone")
        #expect(table.withCurrentState(of: self.p0, generation: 3) { _ in true } == true)
    }

    @Test("after a revocation, events of that generation or older never start a state again; generation 0 never does")
    func revoked() {
        var table = PartitionTable()
        table.revoked[self.p0] = 4
        #expect(table.withState(for: self.p0, generation: 4) { _ in true } == nil)
        #expect(table.withState(for: self.p0, generation: 3) { _ in true } == nil)
        #expect(table.withState(for: PartitionID(topic: "in", partition: 1), generation: 0) { _ in true } == nil)
        #expect(table.withState(for: self.p0, generation: 5) { _ in true } == true)
    }
}
