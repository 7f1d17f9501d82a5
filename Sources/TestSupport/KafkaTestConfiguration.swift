import Foundation
import Kafka

/// A consumer configuration for tests on the mock cluster (or another test broker): earliest offsets, quick
/// heartbeats and commits, small batches. `KAFKA_TEST_DEBUG=cgrp,...` turns on librdkafka's debug contexts.
package func consumerConfiguration(_ broker: some TestKafkaBroker, group: String) -> KafkaConsumerConfiguration {
    var configuration = KafkaConsumerConfiguration(bootstrapServers: broker.bootstrapServers, groupID: group)
    configuration.autoOffsetReset = .earliest
    configuration.commitInterval = .milliseconds(200)
    configuration.sessionTimeout = .seconds(6)
    configuration.heartbeatInterval = .milliseconds(300)
    configuration.maxBatchMessageCount = 100
    configuration.properties = [:]
    if let debug = ProcessInfo.processInfo.environment["KAFKA_TEST_DEBUG"] {
        configuration.properties["debug"] = debug
    }
    return configuration
}

/// A producer configuration for tests: a 2 ms linger, librdkafka's own log off.
package func producerConfiguration(_ broker: some TestKafkaBroker) -> KafkaProducerConfiguration {
    var configuration = KafkaProducerConfiguration(bootstrapServers: broker.bootstrapServers)
    configuration.linger = .milliseconds(2)
    configuration.properties = ["log_level": "0"]
    return configuration
}
