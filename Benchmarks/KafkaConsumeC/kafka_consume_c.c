#include "kafka_consume_c.h"

#include <librdkafka/rdkafka.h>
#include <stdio.h>
#include <time.h>

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

double kafka_consume_c(const char *bootstrap_servers, const char *topic, const char *group_id,
                       long message_count, char *error_text, size_t error_text_size) {
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    const char *settings[][2] = {
        {"bootstrap.servers", bootstrap_servers},
        {"group.id", group_id},
        {"auto.offset.reset", "earliest"},
        {"enable.auto.offset.store", "false"},
        {"log_level", "0"},
    };
    for (size_t i = 0; i < sizeof(settings) / sizeof(settings[0]); i++) {
        if (rd_kafka_conf_set(conf, settings[i][0], settings[i][1], error_text, error_text_size) !=
            RD_KAFKA_CONF_OK) {
            rd_kafka_conf_destroy(conf);
            return -1;
        }
    }
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, error_text, error_text_size);
    if (!rk) {
        rd_kafka_conf_destroy(conf);
        return -1;
    }
    rd_kafka_poll_set_consumer(rk);
    rd_kafka_topic_partition_list_t *topics = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_list_add(topics, topic, RD_KAFKA_PARTITION_UA);
    rd_kafka_resp_err_t err = rd_kafka_subscribe(rk, topics);
    rd_kafka_topic_partition_list_destroy(topics);
    if (err) {
        snprintf(error_text, error_text_size, "subscribe: %s", rd_kafka_err2str(err));
        rd_kafka_destroy(rk);
        return -1;
    }
    long received = 0;
    unsigned long checksum = 0;
    double started = 0;
    double deadline = now_seconds() + 120;
    while (received < message_count && now_seconds() < deadline) {
        rd_kafka_message_t *message = rd_kafka_consumer_poll(rk, 100);
        if (!message) {
            continue;
        }
        if (!message->err) {
            if (received == 0) {
                started = now_seconds();
            }
            const unsigned char *bytes = message->payload;
            for (size_t i = 0; i < message->len; i++) {
                checksum += bytes[i];
            }
            received++;
        }
        rd_kafka_message_destroy(message);
    }
    double elapsed = now_seconds() - started;
    rd_kafka_consumer_close(rk);
    rd_kafka_destroy(rk);
    if (received < message_count) {
        snprintf(error_text, error_text_size, "only %ld of %ld messages arrived (checksum %lu)", received,
                 message_count, checksum);
        return -1;
    }
    return elapsed;
}
