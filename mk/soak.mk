# The churn soak (issue 28): `pushbridge run` instances (release build, real configuration files, token auth) in one
# consumer group against `pushbridge simulator` (GOAWAY every 500 streams, 2% 503s), while events flow at 100/s for
# 240 s into 12 partitions: two instances at 0 s, a third at 36 s, one SIGKILLed at 72 s, every broker down for 5 s at
# 108 s, a fourth at 132 s, two leaving with SIGTERM at 168 s and 192 s; then up to 180 s for the group's commits to
# reach the end offsets. Reports, per membership change, how long partitions had no owner and delivery stopped, the
# duplicate outcomes by cause, the commits, each instance's peak RSS and the accounting (docs/testing.md, "make soak";
# figures in docs/operations.md, "Scaling the group"). Opt-in: not part of make test.
SOAK_BROKER ?= both
SOAK_ARGS   ?=

.PHONY: soak

## make soak: the churn soak on the mock cluster and on Tansu (SOAK_BROKER=mock|tansu|kfake|both|all, default both:
## mock and Tansu; all adds kfake, whose coordinator follows Kafka's, built by scripts/kfake-build.sh), about
## 8 minutes each. SOAK_ARGS adds options, e.g. SOAK_ARGS="--duration 120 --rate 50" or
## SOAK_ARGS="--consumer-property partition.assignment.strategy=cooperative-sticky" (repeatable; also
## session.timeout.ms, heartbeat.interval.ms, group.instance.id). Reports: .build/soak/<run>/report.txt.
soak: deps python-tools
	$(SWIFT) build -c release --product pushbridge $(BUILD_FLAGS)
	$(SWIFT) build -c release --product Soak $(BUILD_FLAGS)
	@set -e; case "$(SOAK_BROKER)" in both) brokers="mock tansu";; all) brokers="mock tansu kfake";; \
	  mock|tansu|kfake) brokers="$(SOAK_BROKER)";; \
	  *) echo "SOAK_BROKER is mock, tansu, kfake, both or all, not $(SOAK_BROKER)"; exit 2;; esac; \
	case " $$brokers " in *" kfake "*) [ -x .build-kfake/kfake-broker ] || scripts/kfake-build.sh;; esac; \
	status=0; for broker in $$brokers; do .build/release/Soak --broker $$broker $(SOAK_ARGS) || status=1; done; \
	exit $$status
