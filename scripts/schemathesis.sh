#!/usr/bin/env bash
# Schemathesis (PyPI) against /openapi.json of a running gateway: `gateway
# demo` (the gateway + the provider simulator, a user with credit, its key
# and its token pair) on a free port. Every operation of the document is in
# the run, with the phases examples, coverage, fuzzing and stateful (the
# document's `links`: from each creating operation to those taking its id).
#
# Made to reach the logic (CONTRIBUTING.md, "Schemathesis"):
#   * every rate-limit capability of endpoints.toml is raised far above the
#     run's rate (GATEWAY_RATE_LIMITS, each capability 100000/s);
#   * the business-plan gate is open (PROVIDER_BUSINESS_PLAN_ACTIVE=true);
#   * credentials per operation, from its `security` (scripts/schemathesis_hooks.py):
#     the API key, the access token (a logout gets one of its own), the
#     admin key (GATEWAY_ADMIN_KEY, random per run); the run's own key and
#     user are never revoked, disabled or deleted (a spare is, instead);
#   * the demo user gets 1,000,000 USD of credit (POST /admin/users/{id}/credits);
#   * the operations a generated call cannot reach alone get valid state in
#     a share of their calls: existing ids, a real WAV or PNG, a registered
#     user, a mailed token (GATEWAY_REQUIRE_EMAIL_CONFIRMATION=true, the
#     demo's outbox), an open stream, a signed Stripe event
#     (scripts/schemathesis_fixtures.py).
# Checks (schemathesis): status code, content type, body schema and headers
# conform to the document. Verdict (scripts/schemathesis_report.py): per
# operation whether it got a 2xx; fails when fewer operations than
# SCHEMATHESIS_MIN_2XX_SHARE got one (default 0.9, of the operations the
# report does not exclude: the two OpenID Connect routes, which need a
# provider the run has none of, see CONTRIBUTING.md, "Schemathesis"), on any 5xx that is the gateway's own (502/504 are the provider's, by spec
# §7), or on fewer calls than the profile's minimum.
#
# SCHEMATHESIS_PROFILE: `quick` (default, the test command: at least 10,000
# calls, 5 to 8 minutes on two shared cores) or `long` (more examples per
# operation, a longer stateful phase, at least 60,000 calls).
# SCHEMATHESIS_SEED (default 1) keeps CI reproducible; SCHEMATHESIS_MAX_EXAMPLES
# overrides the profile's examples per operation, SCHEMATHESIS_WORKERS the
# workers (default 2: with more, hypothesis sometimes fails internally),
# SCHEMATHESIS_PHASES the phases, SCHEMATHESIS_ST_ARGS adds `st run` options.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.local/bin:$PATH"
# Per profile: examples per operation (fuzzing), stateful scenarios and
# their longest, and the least number of calls the run must make.
case "${SCHEMATHESIS_PROFILE:-quick}" in
    quick) examples=30 scenarios=800 steps=12 min_cases=10000 ;;
    long) examples=300 scenarios=3000 steps=24 min_cases=60000 ;;
    *) echo "schemathesis: SCHEMATHESIS_PROFILE is quick or long" >&2; exit 2 ;;
esac
examples="${SCHEMATHESIS_MAX_EXAMPLES:-$examples}"
bin="${CARGO_TARGET_DIR:-target}/debug/gateway"
[ -x "$bin" ] || cargo build -q --locked --bin gateway
work="$(mktemp -d)"
# Every capability of the table, far above the run's rate.
limits="$(python3 -c '
import tomllib
with open("endpoints.toml", "rb") as f:
    caps = tomllib.load(f)["capabilities"]
print(",".join(f"{c}=100000/s" for c in caps))
')"
admin_key="adm_$(od -An -tx1 -N16 /dev/urandom | tr -d ' \n')"
GATEWAY_ADDR=127.0.0.1:0 PROVIDER_BUSINESS_PLAN_ACTIVE=true RUST_LOG=warn \
    GATEWAY_REQUIRE_EMAIL_CONFIRMATION=true \
    GATEWAY_RATE_LIMITS="$limits" GATEWAY_ADMIN_KEY="$admin_key" \
    "$bin" demo >"$work/demo.log" 2>&1 &
pid=$!
trap 'kill -INT "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; rm -rf "$work" ${data_dir:+"$data_dir"}' EXIT
for _ in $(seq 300); do
    grep -q 'export REFRESH=' "$work/demo.log" && break
    kill -0 "$pid" 2>/dev/null || { cat "$work/demo.log" >&2; echo "schemathesis: the demo gateway did not start" >&2; exit 1; }
    sleep 0.1
done
field() { grep -o "$1" "$work/demo.log" | head -1 | sed "s/^$2//"; }
base="$(field 'running on http://[0-9.:]*' 'running on ')"
key="$(field 'export KEY=[^ ]*' 'export KEY=')"
token="$(field 'export TOKEN=[^ ]*' 'export TOKEN=')"
refresh="$(field 'export REFRESH=[^ ]*' 'export REFRESH=')"
user_id="$(field 'demo user (id [0-9]*' 'demo user (id ')"
key_id="$(field 'key id [0-9]*' 'key id ')"
data_dir="$(field 'Data directory: [^ ]*' 'Data directory: ')"
ttl="$(field 'expires in [0-9]*' 'expires in ')"
for v in base key token refresh user_id key_id ttl data_dir; do
    [ -n "${!v}" ] || { cat "$work/demo.log" >&2; echo "schemathesis: no $v from the demo" >&2; exit 1; }
done
api() { curl -sf "$base/api/v1$1" -H 'Content-Type: application/json' "${@:2}"; }
api "/admin/users/$user_id/credits" -H "X-Admin-Key: $admin_key" -d '{"amount": "1000000"}' >/dev/null
spare_user="$(api /auth/register -d '{"username": "spare", "email": "spare@example.com",
    "password": "spare-password-1", "accept_privacy_policy": true}' |
    python3 -c 'import json, sys; print(json.load(sys.stdin)["id"])')"
spare_key="$(api /keys -H "Authorization: Bearer $token" -d '{"name": "spare"}' |
    python3 -c 'import json, sys; print(json.load(sys.stdin)["id"])')"
curl -sf "$base/openapi.json" -o "$work/openapi.json"
# The stateful phase follows the document's links: longer scenarios reach
# the operations that take an id made steps earlier (a clip of a project).
cat >"$work/schemathesis.toml" <<EOF
[phases.fuzzing.generation]
max-examples = $examples
[phases.stateful]
max-steps = $steps
[phases.stateful.generation]
max-examples = $scenarios
EOF
started=$SECONDS
set +e
ST_BASE="$base" ST_KEY="$key" ST_TOKEN="$token" ST_REFRESH="$refresh" ST_TOKEN_TTL="$ttl" \
    ST_ADMIN_KEY="$admin_key" ST_USER_ID="$user_id" ST_KEY_ID="$key_id" \
    ST_SPARE_USER_ID="$spare_user" ST_SPARE_KEY_ID="$spare_key" ST_REPORT="$work/calls.ndjson" ST_DATA_DIR="$data_dir" \
    PYTHONPATH="$PWD/scripts${PYTHONPATH:+:$PYTHONPATH}" SCHEMATHESIS_HOOKS=schemathesis_hooks \
    st --config-file "$work/schemathesis.toml" run "$base/openapi.json" \
    --checks status_code_conformance,content_type_conformance,response_schema_conformance,response_headers_conformance \
    --phases "${SCHEMATHESIS_PHASES:-examples,coverage,fuzzing,stateful}" \
    ${SCHEMATHESIS_ST_ARGS:-} \
    --generation-with-security-parameters false \
    --workers "${SCHEMATHESIS_WORKERS:-2}" \
    --request-timeout 60 \
    --seed "${SCHEMATHESIS_SEED:-1}" \
    --no-color
st_status=$?
set -e
echo "== schemathesis: $((SECONDS - started)) s (profile ${SCHEMATHESIS_PROFILE:-quick}, $examples examples per operation)"
python3 scripts/schemathesis_report.py "$work/openapi.json" "$work/calls.ndjson" "$min_cases" \
    "${SCHEMATHESIS_MIN_2XX_SHARE:-0.9}"
exit "$st_status"
