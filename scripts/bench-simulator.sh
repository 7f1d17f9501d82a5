#!/usr/bin/env bash
# The APNs simulator's CPU per request (docs/benchmarks.md, "APNs simulator"): `pushbridge simulator` started as
# BridgeBench starts it, then `h2load -n N -c 1 -m 100` with BridgeBench's request (path, apns-* headers, body)
# and a valid bearer JWT. CPU per request = the simulator's utime + stime (/proc/PID/stat) during h2load / N.
#
#   scripts/bench-simulator.sh [PUSHBRIDGE] [REQUESTS]    defaults: .build/release/pushbridge, 200000
#   PERF=1 scripts/bench-simulator.sh                     also `perf record -g` the simulator (perf.data)
#
# Needs openssl and h2load (nghttp2-client). Keys, certificate and JWT are made fresh in .build/bench-simulator;
# nothing is printed of them.
set -euo pipefail
cd "$(dirname "$0")/.."
pushbridge=$(realpath "${1:-.build/release/pushbridge}")
requests=${2:-200000}
directory=.build/bench-simulator
mkdir -p "$directory"
cd "$directory"

base64url() { openssl base64 -A | tr '+/' '-_' | tr -d '='; }
# 32 bytes of big-endian hex from an ASN.1 INTEGER's hex (DER may add a leading 00 or drop leading zeros).
hex32() { local hex=$1; hex=${hex#00}; while [ ${#hex} -lt 64 ]; do hex="0$hex"; done; echo "${hex: -64}"; }

openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout server-key.pem -out server-cert.pem \
    -days 1 -subj /CN=localhost -addext subjectAltName=DNS:localhost,IP:127.0.0.1 2>/dev/null
openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out AuthKey_BENCHKEY01.p8
header=$(printf '{"alg":"ES256","kid":"BENCHKEY01"}' | base64url)
claims=$(printf '{"iss":"BENCHTEAM1","iat":%d}' "$(date +%s)" | base64url)
printf '%s.%s' "$header" "$claims" | openssl dgst -sha256 -sign AuthKey_BENCHKEY01.p8 -out signature.der
integers=($(openssl asn1parse -inform DER -in signature.der | sed -n 's/.*INTEGER *://p'))
raw="$(hex32 "${integers[0]}")$(hex32 "${integers[1]}")"
jwt="$header.$claims.$(printf '%b' "$(echo "$raw" | sed 's/../\\x&/g')" | base64url)"
# BridgeBench's sample notification: event 0 of its route (docs/benchmarks.md, "Bridge end to end").
printf '%s' '{"aps":{"alert":{"title":"Your order 100000 has shipped","body":"Demo Express expects to deliver it tomorrow"},"badge":0,"sound":"default"},"order_id":100000}' >body.json
printf 'latency_ms: 0\n' >scenario.yaml
token=e220a8397b1dcdaf6e789e6aa1b965f406c45d188009454ff88bb8a8724c81ec

"$pushbridge" simulator --port 0 --tls-cert server-cert.pem --tls-key server-key.pem \
    --jwt-key BENCHKEY01=AuthKey_BENCHKEY01.p8 --scenario scenario.yaml >simulator.out 2>&1 &
simulator=$!
trap 'kill $simulator 2>/dev/null || true' EXIT
for _ in $(seq 100); do grep -q "listening on" simulator.out && break; sleep 0.1; done
port=$(sed -n 's/.*listening on 127.0.0.1:\([0-9]*\).*/\1/p' simulator.out)
[ -n "$port" ] || { cat simulator.out >&2; exit 1; }
request=(-d body.json -H "apns-push-type: alert" -H "apns-topic: com.example.shop" -H "apns-priority: 10"
    -H "apns-id: 8b4c2a1e-1234-4abc-8def-0123456789ab" -H "apns-expiration: $(($(date +%s) + 86400))"
    -H "apns-collapse-id: order-100000" -H "authorization: bearer $jwt"
    "https://127.0.0.1:$port/3/device/$token")

h2load -n 2000 -c 1 -m 100 "${request[@]}" >/dev/null # warm-up (TLS, first token verification)
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$simulator/stat"; }
if [ -n "${PERF:-}" ]; then
    perf record -g --call-graph dwarf,16384 -F 999 -p "$simulator" -o perf.data 2>perf.err &
    perf_pid=$!
    sleep 1
fi
before=$(cpu_ticks)
h2load -n "$requests" -c 1 -m 100 "${request[@]}" >h2load.out
after=$(cpu_ticks)
if [ -n "${PERF:-}" ]; then kill -INT "$perf_pid" && wait "$perf_pid" || true; fi
grep -E "^finished in|^status codes" h2load.out
awk -v ticks=$((after - before)) -v hz="$(getconf CLK_TCK)" -v n="$requests" \
    'BEGIN { printf "simulator CPU: %.1f µs/request\n", ticks / hz / n * 1e6 }'
kill -TERM $simulator && wait $simulator || true
grep "signatures verified" simulator.out
