#!/usr/bin/env bash
# make lint-deploy: checks everything under deploy/ and config/ (docs/deployment.md, "Validation").
#   1. yamllint (.yamllint) on every YAML file under deploy/ and config/;
#   2. hadolint on deploy/Dockerfile;
#   3. every Kubernetes manifest against its schema (Kubernetes' own kinds: the schemas kubernetes-validate
#      bundles, strict; custom resources: deploy/schemas/), plus the cross-checks of validate-manifests.py;
#      and the references of deploy/docker-compose.yml (services, volumes, mounted files); the Grafana dashboard
#      deploy/grafana/pushbridge.json (structure, and every query names a metric the bridge exports); and the
#      script's list of exported metrics against docs/operations.md's table;
#   4. when kubectl is installed, the output of `kubectl kustomize deploy/kubernetes` the same way;
#   5. scripts/test-validate-manifests.sh: broken copies of deploy/ must be rejected (the checks can fail).
# The tools are installed once into .build-lint/venv by scripts/python-tools.sh (pinned in
# python-requirements.txt); later runs install nothing and print nothing unless a check fails.
set -euo pipefail
cd "$(dirname "$0")/.."

KUBERNETES_VERSION="${KUBERNETES_VERSION:-1.31.0}"   # the oldest Kubernetes the manifests must run on
venv=.build-lint/venv
scripts/python-tools.sh
export PATH="$PWD/$venv/bin:$PATH"

yamllint --strict --format parsable deploy config .yamllint

hadolint --failure-threshold info deploy/Dockerfile

manifests=()
for file in deploy/kubernetes/*.yaml deploy/prometheus/*.yaml; do
    [[ "$file" == deploy/kubernetes/pushbridge.yaml ]] && continue   # the configuration, not a manifest
    manifests+=("$file")
done
python scripts/validate-manifests.py --kubernetes-version "$KUBERNETES_VERSION" \
    --consistency deploy/kubernetes --compose deploy/docker-compose.yml --dashboard deploy/grafana/pushbridge.json \
    "${manifests[@]}"

if command -v kubectl >/dev/null 2>&1; then
    rendered=.build-lint/kustomize.yaml
    kubectl kustomize deploy/kubernetes >"$rendered"
    python scripts/validate-manifests.py --kubernetes-version "$KUBERNETES_VERSION" "$rendered"
fi

# The checks above must be able to fail: broken copies of deploy/ are rejected with the right message.
scripts/test-validate-manifests.sh
