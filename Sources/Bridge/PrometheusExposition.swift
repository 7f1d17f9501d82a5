/// Reads values back from a Prometheus text exposition, the format `/metrics` serves: the demo reports the
/// bridge's own counters from it, and tests check what a scrape shows.
package enum PrometheusExposition {
    /// The samples of metric `name` over all its label sets: the value of every `name{…} value` and
    /// `name value` line (label values the bridge uses never hold a space).
    package static func samples(of name: String, in text: String) -> [Double] {
        text.split(separator: "\n").compactMap { line in
            guard line.hasPrefix(name + "{") || line.hasPrefix(name + " ") else { return nil }
            return line.split(separator: " ").last.flatMap { Double($0) }
        }
    }

    /// The sum of metric `name`'s samples over all its label sets; 0 when it has none yet (a counter appears
    /// with its first increment).
    package static func sum(of name: String, in text: String) -> Double {
        self.samples(of: name, in: text).reduce(0, +)
    }
}
