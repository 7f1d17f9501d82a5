/// Text a server or client chose, made safe for logs and errors.
package enum HTTP2Text {
    /// At most `limit` bytes of `bytes` as UTF-8 (invalid sequences replaced), control characters written as
    /// `\u{..}`, and `...` when cut.
    package static func excerpt(_ bytes: some Collection<UInt8>, limit: Int) -> String {
        let cut = bytes.count > limit
        var text = ""
        for scalar in String(decoding: bytes.prefix(max(limit, 0)), as: UTF8.self).unicodeScalars {
            if scalar.properties.generalCategory == .control {
                text += "\\u{\(String(scalar.value, radix: 16))}"
            } else {
                text.unicodeScalars.append(scalar)
            }
        }
        return cut ? text + "..." : text
    }
}
