#!/usr/bin/env bash
# The whole test suite, as README.md gives it and CI runs it (.ci/run):
# check formatting, build everything, run every test, then the benchmark harness's smoke run
# (it fails on errors, never on timing). Ends with one "N passed, N failed" line.
# Then the integration suite again on PostgreSQL when it is reachable
# (skipped, saying so, when it is not).
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
# setup-tools.sh made sure Redis answers: the scale-out tests must not skip.
export GATEWAY_TEST_REQUIRE_REDIS=1
cargo build --workspace --all-targets --locked
cargo test --workspace --locked 2>&1 | tee "$log"
# The faults-under-load test (tests/it/faults_under_load.rs) alone: it stops
# and starts its own PostgreSQL, Redis and S3 link and times their recovery,
# so it is #[ignore]d in the parallel run above. Run once, like every other
# test: its fault windows are bounded by when each fault was begun and ended
# (each clock read on the safe side of the change it marks), not by durations.
cargo test --workspace --exclude sim --locked --test it -- \
    --ignored --exact faults_under_load::postgresql_redis_s3_and_disk_faults_under_steady_traffic \
    --nocapture 2>&1 | tee -a "$log"
# The integration suite again on PostgreSQL (with Redis: several instances
# share both), whenever PostgreSQL is reachable; CI (.ci/run) starts it and
# sets GATEWAY_TEST_REQUIRE_POSTGRES=1 so that a missing one fails.
export GATEWAY_TEST_DATABASE_URL="${GATEWAY_TEST_DATABASE_URL:-postgres://postgres@127.0.0.1:5432/postgres}"
if (exec 3<>/dev/tcp/127.0.0.1/5432) 2>/dev/null; then
    echo "== the integration suite on PostgreSQL ($GATEWAY_TEST_DATABASE_URL)"
    # `--workspace --exclude sim --test it`, not `-p server --test it`: with
    # `-p server` cargo unifies only server's dependencies' features (not
    # runtime's dev-dependencies': tokio's `test-util`, proptest's
    # regex-syntax, ...), so dependencies would build a second time. With the
    # workspace's package set the features are the first pass's and nothing
    # compiles; `--exclude sim` leaves out the simulator's own `it` suite
    # (it does not use the database) without changing any feature.
    cargo test --workspace --exclude sim --locked --test it 2>&1 | tee -a "$log"
elif [ "${GATEWAY_TEST_REQUIRE_POSTGRES:-}" = 1 ]; then
    echo "PostgreSQL (127.0.0.1:5432) unreachable, and GATEWAY_TEST_REQUIRE_POSTGRES=1" >&2
    exit 1
else
    echo "SKIPPED: the integration suite on PostgreSQL: nothing answers on 127.0.0.1:5432"
fi
unset GATEWAY_TEST_DATABASE_URL
./scripts/schemathesis.sh
cargo run -q --locked -p bench --bin gateway-bench -- --quick --out "$(mktemp -d)/bench.json"
awk '/^test result:/ { for (i = 1; i <= NF; i++) { if ($i ~ /^passed/) p += $(i-1); if ($i ~ /^failed/) f += $(i-1) } }
     END { printf "%d passed, %d failed\n", p, f }' "$log"
