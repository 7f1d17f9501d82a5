// librdkafka's public API and its mock cluster, exposed to Swift as one module.
#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>
