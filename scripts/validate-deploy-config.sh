#!/usr/bin/env bash
# make validate-deploy-config: `pushbridge validate` on deploy/kubernetes/pushbridge.yaml, the file both
# Kubernetes and the docker-compose trial run, once with each one's environment:
#   - Kubernetes: the literals of the pushbridge-env ConfigMap in deploy/kubernetes/kustomization.yaml;
#   - compose: deploy/compose/trial.env.
# The credential files are stand-ins made here with openssl (a P-256 key, a self-signed certificate).
# Usage: scripts/validate-deploy-config.sh [PUSHBRIDGE_BINARY]   (default .build/debug/pushbridge)
set -euo pipefail
cd "$(dirname "$0")/.."
binary="${1:-.build/debug/pushbridge}"
config=deploy/kubernetes/pushbridge.yaml
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The variables of one environment, as NAME=VALUE lines. PyYAML comes with yamllint in the project's virtual
# environment (scripts/lint-deploy.sh); the system Python need not have it.
python=.build-lint/venv/bin/python
[[ -x "$python" ]] || { echo "error: $python is missing; run make lint-deploy first" >&2; exit 1; }
kubernetes_environment() {
    "$python" -c 'import yaml, sys
for generator in yaml.safe_load(open(sys.argv[1]))["configMapGenerator"]:
    if generator["name"] == "pushbridge-env":
        print("\n".join(generator["literals"]))' deploy/kubernetes/kustomization.yaml
}
compose_environment() {
    grep -E '^[A-Z_]+=' deploy/compose/trial.env
}

for setup in kubernetes compose; do
    mapfile -t variables < <("${setup}_environment")
    key_id=$(printf '%s\n' "${variables[@]}" | sed -n 's/^APNS_KEY_ID=//p')
    openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$work/AuthKey_$key_id.p8" 2>/dev/null
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 -subj /CN=simulator \
        -keyout "$work/simulator-key.pem" -out "$work/simulator-cert.pem" 2>/dev/null
    # The files' directories are the ones the two setups mount; here they all live in $work.
    env -i PATH="$PATH" "${variables[@]}" APNS_KEY_DIR="$work" \
        APNS_CA_FILE="$(printf '%s\n' "${variables[@]}" | grep -q '^APNS_CA_FILE=' && echo "$work/simulator-cert.pem")" \
        "$binary" validate --config "$config" >/dev/null || {
        echo "error: $config is not valid with the $setup environment (output above)" >&2
        exit 1
    }
done
echo "$config: valid for Kubernetes and for the compose trial"
