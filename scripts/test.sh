#!/usr/bin/env bash
# The whole test suite, as the README gives it and CI runs it (.ci/run):
# check formatting, build everything, run every test, then the benchmark harness's smoke run
# (it fails on errors, never on timing). Ends with one "N passed, N failed" line.
# Then the integration suite again on PostgreSQL + Redis when they are reachable
# (skipped, saying so, when they are not).
# Then schemathesis against /openapi.json of a running gateway + simulator
# (scripts/schemathesis.sh). Tools beyond cargo (Debian's chromium for the /docs
# check, schemathesis from PyPI) are installed by scripts/setup-tools.sh when missing.
set -euo pipefail
cd "$(dirname "$0")/.."
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
if cargo fmt --version >/dev/null 2>&1; then
    cargo fmt --all --check
else
    echo "rustfmt not installed: formatting not checked" >&2
fi
./scripts/setup-tools.sh
export GATEWAY_TEST_REQUIRE_CHROMIUM=1
cargo build --workspace --all-targets --locked
cargo test --workspace --locked 2>&1 | tee "$log"
# The integration suite again on PostgreSQL and Redis (scale-out: several
# instances share them), whenever they are reachable; CI (.ci/run) starts
# them and sets GATEWAY_TEST_REQUIRE_POSTGRES=1 so that a missing one fails.
export GATEWAY_TEST_DATABASE_URL="${GATEWAY_TEST_DATABASE_URL:-postgres://postgres@127.0.0.1:5432/postgres}"
export GATEWAY_TEST_REDIS_URL="${GATEWAY_TEST_REDIS_URL:-redis://127.0.0.1:6379}"
reachable() { (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null; }
if reachable 127.0.0.1 5432 && reachable 127.0.0.1 6379; then
    echo "== the integration suite on PostgreSQL ($GATEWAY_TEST_DATABASE_URL) and Redis ($GATEWAY_TEST_REDIS_URL)"
    cargo test --locked -p server --test it 2>&1 | tee -a "$log"
elif [ "${GATEWAY_TEST_REQUIRE_POSTGRES:-}" = 1 ]; then
    echo "PostgreSQL (127.0.0.1:5432) or Redis (127.0.0.1:6379) unreachable, and GATEWAY_TEST_REQUIRE_POSTGRES=1" >&2
    exit 1
else
    echo "SKIPPED: the PostgreSQL/Redis suite: PostgreSQL (127.0.0.1:5432) or Redis (127.0.0.1:6379) is not reachable"
    unset GATEWAY_TEST_DATABASE_URL GATEWAY_TEST_REDIS_URL
fi
./scripts/schemathesis.sh
cargo run -q --locked -p bench --bin gateway-bench -- --quick --out "$(mktemp -d)/bench.json"
awk '/^test result:/ { for (i = 1; i <= NF; i++) { if ($i ~ /^passed/) p += $(i-1); if ($i ~ /^failed/) f += $(i-1) } }
     END { printf "%d passed, %d failed\n", p, f }' "$log"
