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
#   Applies SED_EXPRESSION to FILE (relative to the repository: deploy/... or docs/...) in a fresh copy of deploy/
#   and docs/ and expects EXPECTED_MESSAGE.
expect_rejected() {
    local name=$1 expected=$2 file=$3 expression=$4
    rm -rf "$work/deploy" "$work/docs" && cp -r deploy "$work/deploy" && cp -r docs "$work/docs"
    sed -i -e "$expression" "$work/$file"
    if cmp -s "$file" "$work/$file"; then
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
        --compose "$work/deploy/docker-compose.yml" --dashboard "$work/deploy/grafana/pushbridge.json" \
        --metrics-doc "$work/docs/operations.md" "${manifests[@]}" 2>&1); then
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
    deploy/kubernetes/deployment.yaml 's/readOnlyRootFilesystem:/readOnlyRootFileSystem:/'
expect_rejected "wrong type in a core kind" \
    "is not of type 'integer'" \
    deploy/kubernetes/service.yaml 's/port: 9464/port: metrics-port/'
expect_rejected "misspelt KEDA kafka metadata" \
    "'lagThreshold' is a required property" \
    deploy/kubernetes/scaledobject.yaml '0,/lagThreshold:/s/lagThreshold:/lagTreshold:/'
expect_rejected "ServiceMonitor without endpoints" \
    "'endpoints' is a required property" \
    deploy/kubernetes/servicemonitor.yaml 's/^  endpoints:/  endpoint:/'
expect_rejected "alert without a runbook" \
    "'runbook' is a required property" \
    deploy/prometheus/alerts.yaml '0,/runbook:/s/runbook:/run_book:/'
expect_rejected "alert on a metric PushBridge does not export" \
    "pushbridge_halt is not a PushBridge metric" \
    deploy/prometheus/alerts.yaml 's/pushbridge_halted{/pushbridge_halt{/'
expect_rejected "grace period shorter than the drain" \
    "must exceed shutdown.drain_timeout" \
    deploy/kubernetes/deployment.yaml 's/terminationGracePeriodSeconds: 60/terminationGracePeriodSeconds: 30/'
expect_rejected "readiness probe on /healthz" \
    "readinessProbe must GET /readyz" \
    deploy/kubernetes/deployment.yaml '/readinessProbe:/,/path:/s|path: /readyz|path: /healthz|'
expect_rejected "KEDA trigger on another consumer group" \
    "watches group other" \
    deploy/kubernetes/scaledobject.yaml '0,/consumerGroup: pushbridge/s/consumerGroup: pushbridge/consumerGroup: other/'
expect_rejected "route topic without a KEDA trigger" \
    "the routes consume" \
    deploy/kubernetes/pushbridge.yaml 's/input_topic: inbox.changed/input_topic: inbox.updated/'
expect_rejected "manifest left out of the kustomization" \
    "poddisruptionbudget.yaml is not listed under resources" \
    deploy/kubernetes/kustomization.yaml '/- poddisruptionbudget.yaml/d'
expect_rejected "compose service depending on a missing service" \
    "depends_on kafka-setup, which is not a service" \
    deploy/docker-compose.yml 's/^      kafka-init:$/      kafka-setup:/'
expect_rejected "compose mount of a missing file" \
    "mounted file ./compose/create-topic.sh does not exist" \
    deploy/docker-compose.yml 's|./compose/create-topics.sh:|./compose/create-topic.sh:|'
expect_rejected "dashboard query on a metric PushBridge does not export" \
    "pushbridge_halt is not a PushBridge metric" \
    deploy/grafana/pushbridge.json 's/max by (instance) (pushbridge_halted{/max by (instance) (pushbridge_halt{/'
expect_rejected "dashboard panel beyond the grid" \
    "beyond the 24 columns" \
    deploy/grafana/pushbridge.json '0,/"w": 12,/s/"w": 12,/"w": 25,/'
expect_rejected "dashboard query on a fixed data source" \
    "is not on the \${datasource} variable" \
    deploy/grafana/pushbridge.json '0,/"uid": "\${datasource}"/s/"uid": "\${datasource}"/"uid": "P1809F7CD0C75ACF3"/'
expect_rejected "documented metric missing from the script's list" \
    "pushbridge_made_up_total is documented but missing from METRICS" \
    docs/operations.md 's/^| `pushbridge_halted` |/| `pushbridge_made_up_total` | counter | — | x |\n| `pushbridge_halted` |/'

if ((failures > 0)); then
    echo "test-validate-manifests: $failures case(s) failed" >&2
    exit 1
fi
