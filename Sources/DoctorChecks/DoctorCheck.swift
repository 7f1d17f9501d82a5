import Foundation

/// The result of one `pushbridge doctor` check: one line of its output.
package struct DoctorCheck: Sendable, Hashable, CustomStringConvertible {
    /// How the check went.
    package enum Status: String, Sendable, Hashable, Comparable {
        /// Nothing to do.
        case ok
        /// Works now, but needs attention (or could not be checked).
        case warn
        /// Will not work: `doctor` exits 1.
        case fail

        /// `ok` < `warn` < `fail`.
        package static func < (lhs: Status, rhs: Status) -> Bool {
            let order: [Status] = [.ok, .warn, .fail]
            return order.firstIndex(of: lhs)! < order.firstIndex(of: rhs)!
        }
    }

    /// How the check went.
    package var status: Status
    /// What was checked: the scope (`apns`, `apps.NAME`, `kafka`) and the check, e.g. `apns tls`.
    package var name: String
    /// What the check found (never a secret).
    package var found: String
    /// How to fix it, for anything not ok.
    package var hint: String?

    /// Creates a result.
    package init(_ status: Status, _ name: String, _ found: String, hint: String? = nil) {
        self.status = status
        self.name = name
        self.found = found
        self.hint = hint
    }

    /// `ok   NAME: FOUND` or `FAIL NAME: FOUND (fix: HINT)` — one line.
    package var description: String {
        let label =
            switch self.status {
            case .ok: "ok  "
            case .warn: "WARN"
            case .fail: "FAIL"
            }
        var line = "\(label) \(self.name): \(self.found)"
        if self.status != .ok, let hint = self.hint {
            line += " (fix: \(hint))"
        }
        return line.replacingOccurrences(of: "\n", with: " ")
    }
}
