#!/bin/bash
# kafka-init: the topics of deploy/compose/pushbridge.yaml. Input topics get 3 partitions (so up to three
# bridge replicas share the work: `docker compose up --scale pushbridge=3` without the published port).
set -euo pipefail
topics=(
    orders.shipped:3
    inbox.changed:3
    pushbridge.outcomes:3
    pushbridge.invalid-tokens:1
    pushbridge.dead-letters:1
)
for entry in "${topics[@]}"; do
    /opt/kafka/bin/kafka-topics.sh --bootstrap-server kafka:9092 --create --if-not-exists \
        --topic "${entry%%:*}" --partitions "${entry##*:}" --replication-factor 1
done
/opt/kafka/bin/kafka-topics.sh --bootstrap-server kafka:9092 --list
