#!/bin/sh
# keys: creates, once, what the trial needs in the volume given as $1 (openssl comes with ca-certificates):
#   AuthKey_TRIAL00001.p8   a throw-away provider key (PEM PKCS#8, P-256) the bridge signs its JWTs with;
#                           the simulator accepts it (--jwt-key). Apple knows nothing of it.
#   simulator-cert.pem/-key.pem   the simulator's self-signed TLS certificate for the host name `simulator`;
#                           the bridge trusts it through apns.ca_file.
set -eu
directory=$1
cd "$directory"
if [ ! -f AuthKey_TRIAL00001.p8 ]; then
    openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out AuthKey_TRIAL00001.p8
fi
if [ ! -f simulator-cert.pem ]; then
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 365 \
        -subj "/CN=simulator" -addext "subjectAltName=DNS:simulator,DNS:localhost,IP:127.0.0.1" \
        -keyout simulator-key.pem -out simulator-cert.pem 2>/dev/null
fi
chown 10001:10001 AuthKey_TRIAL00001.p8 simulator-key.pem simulator-cert.pem
chmod 0400 AuthKey_TRIAL00001.p8 simulator-key.pem
chmod 0444 simulator-cert.pem
ls -l "$directory"
