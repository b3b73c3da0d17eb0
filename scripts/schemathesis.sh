#!/usr/bin/env bash
# Schemathesis (PyPI) against /openapi.json of a running gateway: `gateway
# demo` (the gateway + the provider simulator, a user with credit and a valid
# key) on a free port. Fails on any 5xx and on any answer outside its
# documented shape (status, content type, body schema, headers).
#
# What it does not check, on purpose (see README, "Observability"):
#   * positive/negative data acceptance: the table types bodies, but modes
#     check more than the table says (URL formats, account rules, ...);
#   * /api/v1/videos/ and /api/v1/audio/: left out since their rows were 501
#     stubs; they are implemented now, and including them is still to do.
# The business-plan gate is opened (PROVIDER_BUSINESS_PLAN_ACTIVE=true):
# closed, gated rows answer a documented 503 by design.
#
# SCHEMATHESIS_SEED (default 1) and SCHEMATHESIS_MAX_EXAMPLES (default 20)
# tune the run; a fixed seed keeps CI reproducible.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.local/bin:$PATH"
bin="${CARGO_TARGET_DIR:-target}/debug/gateway"
[ -x "$bin" ] || cargo build -q --locked --bin gateway
out="$(mktemp)"
GATEWAY_ADDR=127.0.0.1:0 PROVIDER_BUSINESS_PLAN_ACTIVE=true RUST_LOG=warn "$bin" demo >"$out" 2>&1 &
pid=$!
trap 'kill -INT "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; rm -f "$out"' EXIT
for _ in $(seq 300); do
    grep -q 'export KEY=' "$out" && break
    kill -0 "$pid" 2>/dev/null || { cat "$out" >&2; echo "schemathesis: the demo gateway did not start" >&2; exit 1; }
    sleep 0.1
done
base="$(grep -o 'running on http://[0-9.:]*' "$out" | head -1 | sed 's/^running on //')"
key="$(grep -o 'gk_[0-9a-f]*' "$out" | head -1)"
[ -n "$base" ] && [ -n "$key" ] || { cat "$out" >&2; echo "schemathesis: no address or key from the demo" >&2; exit 1; }
st run "$base/openapi.json" \
    --header "Authorization: Bearer $key" \
    --checks not_a_server_error,status_code_conformance,content_type_conformance,response_schema_conformance,response_headers_conformance \
    --exclude-path-regex '^/api/v1/(videos|audio)/' \
    --phases examples,coverage,fuzzing \
    --max-examples "${SCHEMATHESIS_MAX_EXAMPLES:-20}" \
    --seed "${SCHEMATHESIS_SEED:-1}" \
    --no-color
