/// How fast the bridge used a stream limit raised after a connection's first answer (`--stream-limit-raise`),
/// from the outcomes' `completed_at`. The simulator raises the limit from 1 to N once it answered a connection's
/// first request, at t0. A client that follows at once sends N requests at t0, and the simulator answers them one
/// round trip later: the (N+1)th completion at t0 + RTT. How much later it comes is the bridge's lag in using the
/// new limit (plus the simulator's own time for N requests).
struct StreamRamp {
    /// The first completion (t0), in milliseconds since the epoch.
    let firstCompletion: Int64?
    /// The (N+1)th completion after t0 minus t0 minus the round trip; `nil` with fewer completions.
    let lagMilliseconds: Int64?
    /// Completions in the first second after t0, and what the bound allows in it (N per round trip).
    let firstSecond: (completed: Int, bound: Int)
    let raisedLimit: Int
    let roundTripMilliseconds: Int

    init(completions: [Int64], raisedLimit: Int, roundTripMilliseconds: Int) {
        let sorted = completions.sorted()
        self.raisedLimit = raisedLimit
        self.roundTripMilliseconds = roundTripMilliseconds
        self.firstCompletion = sorted.first
        if let first = sorted.first, sorted.count > raisedLimit {
            self.lagMilliseconds = sorted[raisedLimit] - first - Int64(roundTripMilliseconds)
        } else {
            self.lagMilliseconds = nil
        }
        let first = sorted.first ?? 0
        let inFirstSecond = sorted.prefix { $0 < first + 1000 }.count
        let bound = 1 + raisedLimit * (1000 / max(1, roundTripMilliseconds))
        self.firstSecond = (inFirstSecond, bound)
    }

    /// The report's line.
    func report(raise: Int) -> String {
        var line = "  stream limit:   1 on connect, \(raise) once a connection's first request was answered; "
        line += "round trip (simulator latency) \(self.roundTripMilliseconds) ms: "
        if let lag = self.lagMilliseconds {
            line += "\(self.raisedLimit + 1) completions \(lag) ms later than a client that follows at once"
        } else {
            line += "fewer than \(self.raisedLimit + 1) completions"
        }
        line += "; first second after the first answer: \(self.firstSecond.completed) completions "
        line += "(bound \(self.firstSecond.bound))\n"
        return line
    }
}
