#!/usr/bin/env bash
# The whole test suite, as the README gives it and CI runs it (.ci/run).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --workspace --all-targets --locked
cargo test --workspace --locked
cargo run -q --locked -p bench --bin gateway-bench -- --quick --out "$(mktemp -d)/bench.json"
