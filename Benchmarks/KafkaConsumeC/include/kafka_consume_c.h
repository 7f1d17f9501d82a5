// The plain C consume loop the Swift Kafka layer is measured against (Benchmarks/KafkaConsume).
#ifndef KAFKA_CONSUME_C_H
#define KAFKA_CONSUME_C_H

#include <stddef.h>

/// Subscribes a consumer of group `group_id` to `topic` on `bootstrap_servers` and polls with
/// rd_kafka_consumer_poll until `message_count` messages arrived, touching every payload byte.
/// Returns the seconds from the first message to the last, or a negative value on error
/// (`error_text` then says why).
double kafka_consume_c(const char *bootstrap_servers, const char *topic, const char *group_id,
                       long message_count, char *error_text, size_t error_text_size);

#endif
