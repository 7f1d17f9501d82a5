import APNSCore
import Foundation

// The local clock against APNs' `date` header.
extension Doctor {
    /// The local clock against the server's `date` header, by the JWT rules (`iat` must not be in the future;
    /// an hour old is expired).
    func checkClock(_ dateHeader: String?, scope: String, answer: APNSResponse) -> DoctorCheck {
        let name = "\(scope) clock"
        let hint = "synchronise this host's clock (chrony or systemd-timesyncd with NTP)"
        guard let dateHeader, let serverDate = HTTPDate.parse(dateHeader) else {
            if answer.reason == .expiredProviderToken {
                return DoctorCheck(
                    .fail, name, "APNs called a fresh token expired: the clock is off by > 1 h", hint: hint)
            }
            return DoctorCheck(
                .warn, name, "skew not measured: the server sent no date header",
                hint: "compare with NTP: chronyc tracking or timedatectl timesync-status"
            )
        }
        let skew = self.clock.now().timeIntervalSince(serverDate)
        let direction = skew >= 0 ? "ahead of" : "behind"
        let found = "local clock \(Self.text(seconds: abs(skew))) \(direction) the server's date (\(dateHeader))"
        if abs(skew) > Double(self.options.clockSkewFailure.components.seconds) {
            let effect =
                skew > 0
                ? "tokens look issued in the future: APNs refuses them"
                : "tokens look old: APNs calls them expired early"
            return DoctorCheck(.fail, name, "\(found); \(effect)", hint: hint)
        }
        if abs(skew) > Double(self.options.clockSkewWarning.components.seconds) {
            return DoctorCheck(.warn, name, found, hint: hint)
        }
        return DoctorCheck(.ok, name, found)
    }
}
