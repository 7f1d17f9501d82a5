/// Which configuration keys hold secrets, so that no problem ever shows their values (docs/configuration.md,
/// "Secrets in errors").
///
/// The rule is by name, not by value: a value cannot tell whether it is secret, and a rule by name can be
/// documented and checked by a user.
enum ConfigurationSecrets {
    /// The sections whose keys are librdkafka properties, passed through verbatim.
    static let propertySections = ["kafka.properties.", "kafka.consumer_properties.", "kafka.producer_properties."]

    /// Words that make a librdkafka property secret: `sasl.password`, `ssl.key.password`,
    /// `ssl.keystore.password`, `sasl.oauthbearer.client.secret`, `ssl.key.pem`, `sasl.jaas.config`,
    /// `sasl.oauthbearer.config` (which may carry a client secret), and anything named like a credential.
    static let propertyWords = ["password", "secret", "key", "token", "credential", "jaas", "oauthbearer.config"]

    /// Keys outside the property sections whose values are secrets, by their last path component.
    static let secretKeys: Set<String> = ["p12_password", "proxy"]

    /// Whether the key at `path` (a key path such as `kafka.properties.sasl.password` or
    /// `apps.shop.auth.p12_password`) holds a secret.
    static func isSecret(path: String) -> Bool {
        for section in self.propertySections where path.hasPrefix(section) {
            let name = path.dropFirst(section.count).lowercased()
            return self.propertyWords.contains { name.contains($0) }
        }
        let last = path.split(separator: ".").last.map(String.init) ?? path
        return self.secretKeys.contains(last)
    }
}
