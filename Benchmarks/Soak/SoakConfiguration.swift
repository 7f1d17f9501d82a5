import BenchSupport
import Foundation

/// The configuration file of each instance: the example route `order-shipped` (config/pushbridge.yaml) against the
/// simulator with token auth, JSON logs at info level (the soak reads them), and the bridge's defaults elsewhere
/// (`kafka.max_in_flight`, `apns.retry`, `shutdown.drain_timeout` 30 s, `shutdown.rebalance_drain_timeout` 10 s,
/// PushBridge's group defaults, `BridgeRuntime.consumerDefaults`, unless `--consumer-property` sets them).
struct SoakConfiguration {
    var options: SoakOptions
    var bootstrapServers: String
    var group: String
    var simulatorPort: Int
    var caFile: String
    var keyFile: String

    /// The consumer properties of instance `number`: `group.instance.id=V` becomes `V-number`, as each member
    /// needs its own.
    func consumerProperties(instance number: Int) -> [(String, String)] {
        self.options.consumerProperties.map { key, value in
            key == "group.instance.id" ? (key, "\(value)-\(number)") : (key, value)
        }
    }

    func yaml(instance number: Int) -> String {
        let properties = self.consumerProperties(instance: number)
        let consumer =
            properties.isEmpty
            ? "" : "  consumer_properties:\n" + properties.map { "    \($0.0): \"\($0.1)\"\n" }.joined()
        return """
            # Written by make soak (Benchmarks/Soak): instance \(number) of the group.
            kafka:
              bootstrap_servers: "\(self.bootstrapServers)"
              group_id: \(self.group)
              client_id: soak-\(number)
              commit_interval: 1s
            \(consumer)apns:
              environment: sandbox
              endpoint: https://127.0.0.1:\(self.simulatorPort)
              ca_file: "\(self.caFile)"
              auth:
                type: token
                key_file: "\(self.keyFile)"
                key_id: \(Soak.keyID)
                team_id: \(Soak.teamID)
            routes:
            \(EventFactory.route(inputTopic: SoakTopics.input, indent: 2))
            outcomes:
              topic: \(SoakTopics.outcomes)
              invalid_tokens_topic: \(SoakTopics.invalidTokens)
              dead_letter_topic: \(SoakTopics.deadLetters)
            admin:
              listen: 127.0.0.1:0
            logging:
              level: info
              format: json

            """
    }
}
