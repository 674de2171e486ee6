#!/usr/bin/env bash
# Smoke test for the binaries built by build.sh: start etcd and kube-apiserver on
# loopback with the flags documented in docs/test-bins.md, wait for /readyz with a
# system:masters token, make one authenticated write and one RBAC denial, then stop both.
#
#   tools/test-bins/check-controlplane.sh [BIN_DIR]    # default: build.sh --print-dir
#
# Exit 0 when everything answered as expected. Logs stay in the temp dir on failure.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
BIN=${1:-$("$HERE/build.sh" --print-dir)}
for b in etcd kube-apiserver; do
  [ -x "$BIN/$b" ] || { echo "missing $BIN/$b (run build.sh first)" >&2; exit 1; }
done

D=$(mktemp -d "${TMPDIR:-/tmp}/dyn-gitops-controlplane.XXXXXX")
pids=()
stop() {  # SIGTERM, up to 20 s grace, then SIGKILL
  local p=$1 i
  kill "$p" 2>/dev/null || return 0
  for i in $(seq 1 40); do kill -0 "$p" 2>/dev/null || break; sleep 0.5; done
  kill -9 "$p" 2>/dev/null || true
  wait "$p" 2>/dev/null || true
}
cleanup() {
  local rc=$? i
  # kube-apiserver first: without etcd its shutdown hangs (it retries etcd to drop its lease).
  for ((i = ${#pids[@]} - 1; i >= 0; i--)); do stop "${pids[i]}"; done
  if [ $rc -eq 0 ]; then rm -rf "$D"; else echo "logs kept in $D" >&2; fi
}
trap cleanup EXIT

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
EP=$(free_port); PP=$(free_port); AP=$(free_port)

openssl genrsa -out "$D/sa.key" 2048 2>/dev/null
printf '%s\n' 'admin-token,admin,admin-uid,system:masters' 'nobody-token,nobody,nobody-uid,' >"$D/tokens.csv"

start=$SECONDS
"$BIN/etcd" --name=test --data-dir="$D/etcd" \
  --listen-client-urls="http://127.0.0.1:$EP" --advertise-client-urls="http://127.0.0.1:$EP" \
  --listen-peer-urls="http://127.0.0.1:$PP" --initial-advertise-peer-urls="http://127.0.0.1:$PP" \
  --initial-cluster="test=http://127.0.0.1:$PP" \
  --unsafe-no-fsync --log-level=warn >"$D/etcd.log" 2>&1 &
pids+=($!)

"$BIN/kube-apiserver" \
  --etcd-servers="http://127.0.0.1:$EP" \
  --bind-address=127.0.0.1 --advertise-address=127.0.0.1 --secure-port="$AP" \
  --cert-dir="$D/certs" \
  --token-auth-file="$D/tokens.csv" \
  --authorization-mode=RBAC \
  --service-account-issuer=https://kubernetes.default.svc.cluster.local \
  --service-account-key-file="$D/sa.key" --service-account-signing-key-file="$D/sa.key" \
  --service-cluster-ip-range=10.0.0.0/24 \
  --disable-admission-plugins=ServiceAccount --allow-privileged=true \
  --enable-priority-and-fairness=false --profiling=false >"$D/apiserver.log" 2>&1 &
pids+=($!)

URL=https://127.0.0.1:$AP
api() {  # api TOKEN METHOD PATH [BODY]: prints the HTTP status, body goes to $D/out
  curl -sS -o "$D/out" -w '%{http_code}' --cacert "$D/certs/apiserver.crt" \
    -H "Authorization: Bearer $1" -X "$2" ${4:+-H 'Content-Type: application/json' -d "$4"} "$URL$3"
}

ready=0
for _ in $(seq 1 120); do
  for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null || { echo "a process exited early" >&2; exit 1; }; done
  if [ -f "$D/certs/apiserver.crt" ] && [ "$(api admin-token GET /readyz 2>/dev/null)" = 200 ]; then
    ready=1; break
  fi
  sleep 0.5
done
[ $ready = 1 ] || { echo "kube-apiserver not ready after 60s" >&2; exit 1; }
echo "ready after $((SECONDS - start))s: $(cat "$D/out")"

code=$(api admin-token GET /version); echo "GET /version -> $code $(tr -d ' \n' <"$D/out" | cut -c1-60)"
code=$(api admin-token POST /api/v1/namespaces '{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"smoke"}}')
[ "$code" = 201 ] || { echo "create namespace as admin: $code $(cat "$D/out")" >&2; exit 1; }
echo "POST namespace as system:masters -> $code"
code=$(api nobody-token GET /api/v1/namespaces)
[ "$code" = 403 ] || { echo "list namespaces as nobody: expected 403, got $code" >&2; exit 1; }
echo "GET namespaces as unprivileged user -> $code (RBAC denies)"
code=$(api no-such-token GET /readyz)
[ "$code" = 401 ] || { echo "bad token: expected 401, got $code" >&2; exit 1; }
echo "bad token -> $code"
