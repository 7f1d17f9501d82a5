/// One assigned partition in the pipeline: its assignment generation and its events' progress.
struct PartitionState {
    var generation: UInt64
    var progress = PartitionProgress()
    /// Its revocation began: events not yet begun are stale (the next owner gets them from the committed offset).
    var revoking = false
}

/// The pipeline's partitions: the state of each assigned one, and the newest generation revoked of each, so that
/// events fetched before a revocation are told from those of a new assignment. A value, kept under one lock by
/// ``Pipeline``.
struct PartitionTable {
    var partitions: [PartitionID: PartitionState] = [:]
    /// The newest generation revoked per partition: events of it, or older, are stale.
    var revoked: [PartitionID: UInt64] = [:]

    /// Runs `body` on the state an event of `generation` belongs to, in place (a copy would copy its
    /// offsets too, once per event); `nil` without running it when the event is stale. An event of a newer
    /// generation than any known starts that assignment's state: the source announces an assignment
    /// before its events, but the announcement reaches the pipeline through a task that a busy machine may
    /// run late, and dropping such an event would lose it (the source never delivers it again).
    mutating func withState<Result>(
        for partition: PartitionID, generation: UInt64, _ body: (inout PartitionState) -> Result
    ) -> Result? {
        // One hash of the partition (its topic name) per call, in the common case: this runs for every event.
        if let index = self.partitions.index(forKey: partition) {
            // Through one in-place access: reading `generation` first copied the whole state (retaining its
            // deque and dictionaries) only to read one number.
            return Self.inPlace(&self.partitions.values[index]) { state in
                if generation < state.generation { return nil }
                if generation > state.generation { state = PartitionState(generation: generation) }
                return body(&state)
            }
        }
        if generation == 0 || generation <= self.revoked[partition, default: 0] { return nil }
        self.partitions[partition] = PartitionState(generation: generation)
        return body(&self.partitions[partition]!)
    }

    /// Runs `body` on the state of `partition` in place when it is still of `generation`.
    mutating func withCurrentState<Result>(
        of partition: PartitionID, generation: UInt64, _ body: (inout PartitionState) -> Result
    ) -> Result? {
        guard let index = self.partitions.index(forKey: partition) else { return nil }
        return Self.inPlace(&self.partitions.values[index]) { state in
            state.generation == generation ? body(&state) : nil
        }
    }

    /// Runs `body` on `state` through one in-place access of the dictionary's value.
    private static func inPlace<Result>(
        _ state: inout PartitionState, _ body: (inout PartitionState) -> Result?
    ) -> Result? {
        body(&state)
    }
}
