#!/usr/bin/env bash
# The checks of `make lint-deploy` can fail: each case below breaks one thing in a copy of deploy/ and expects
# scripts/validate-manifests.py to reject it with a message naming the problem. Run by scripts/lint-deploy.sh;
# prints nothing when every case behaves.
set -euo pipefail
cd "$(dirname "$0")/.."
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0

# expect_rejected NAME EXPECTED_MESSAGE FILE SED_EXPRESSION
#   Applies SED_EXPRESSION to FILE (relative to deploy/) in a fresh copy and expects EXPECTED_MESSAGE.
expect_rejected() {
    local name=$1 expected=$2 file=$3 expression=$4
    rm -rf "$work/deploy" && cp -r deploy "$work/deploy"
    sed -i -e "$expression" "$work/deploy/$file"
    if cmp -s "deploy/$file" "$work/deploy/$file"; then
        echo "test-validate-manifests: $name: the edit changed nothing in $file" >&2
        failures=$((failures + 1))
        return
    fi
    local manifests=()
    for path in "$work"/deploy/kubernetes/*.yaml "$work"/deploy/prometheus/*.yaml; do
        [[ "$path" == */kubernetes/pushbridge.yaml ]] || manifests+=("$path")
    done
    local output
    if output=$(python scripts/validate-manifests.py --consistency "$work/deploy/kubernetes" \
        --compose "$work/deploy/docker-compose.yml" "${manifests[@]}" 2>&1); then
        echo "test-validate-manifests: $name: accepted, expected: $expected" >&2
        failures=$((failures + 1))
    elif ! grep -qF -- "$expected" <<<"$output"; then
        echo "test-validate-manifests: $name: rejected, but without \"$expected\":" >&2
        echo "$output" >&2
        failures=$((failures + 1))
    fi
}

expect_rejected "unknown field in a core kind (strict schema)" \
    "'readOnlyRootFileSystem' was unexpected" \
    kubernetes/deployment.yaml 's/readOnlyRootFilesystem:/readOnlyRootFileSystem:/'
expect_rejected "wrong type in a core kind" \
    "is not of type 'integer'" \
    kubernetes/service.yaml 's/port: 9464/port: metrics-port/'
expect_rejected "misspelt KEDA kafka metadata" \
    "'lagThreshold' is a required property" \
    kubernetes/scaledobject.yaml '0,/lagThreshold:/s/lagThreshold:/lagTreshold:/'
expect_rejected "ServiceMonitor without endpoints" \
    "'endpoints' is a required property" \
    kubernetes/servicemonitor.yaml 's/^  endpoints:/  endpoint:/'
expect_rejected "alert without a runbook" \
    "'runbook' is a required property" \
    prometheus/alerts.yaml '0,/runbook:/s/runbook:/run_book:/'
expect_rejected "alert on a metric PushBridge does not export" \
    "pushbridge_halt is not a PushBridge metric" \
    prometheus/alerts.yaml 's/pushbridge_halted{/pushbridge_halt{/'
expect_rejected "grace period shorter than the drain" \
    "must exceed shutdown.drain_timeout" \
    kubernetes/deployment.yaml 's/terminationGracePeriodSeconds: 60/terminationGracePeriodSeconds: 30/'
expect_rejected "readiness probe on /healthz" \
    "readinessProbe must GET /readyz" \
    kubernetes/deployment.yaml '/readinessProbe:/,/path:/s|path: /readyz|path: /healthz|'
expect_rejected "KEDA trigger on another consumer group" \
    "watches group other" \
    kubernetes/scaledobject.yaml '0,/consumerGroup: pushbridge/s/consumerGroup: pushbridge/consumerGroup: other/'
expect_rejected "route topic without a KEDA trigger" \
    "the routes consume" \
    kubernetes/pushbridge.yaml 's/input_topic: inbox.changed/input_topic: inbox.updated/'
expect_rejected "manifest left out of the kustomization" \
    "poddisruptionbudget.yaml is not listed under resources" \
    kubernetes/kustomization.yaml '/- poddisruptionbudget.yaml/d'
expect_rejected "compose service depending on a missing service" \
    "depends_on kafka-setup, which is not a service" \
    docker-compose.yml 's/^      kafka-init:$/      kafka-setup:/'
expect_rejected "compose mount of a missing file" \
    "mounted file ./compose/create-topic.sh does not exist" \
    docker-compose.yml 's|./compose/create-topics.sh:|./compose/create-topic.sh:|'

if ((failures > 0)); then
    echo "test-validate-manifests: $failures case(s) failed" >&2
    exit 1
fi
