#!/usr/bin/env bash
# Tools the test command needs besides cargo, installed from Debian when
# missing (idempotent: what is installed is skipped). Called by
# scripts/test.sh; safe to run by hand.
#
#   chromium   renders /docs in a headless browser (tests/it/observe.rs)
set -euo pipefail

need_apt=()
command -v chromium >/dev/null 2>&1 || need_apt+=(chromium)

if ((${#need_apt[@]})); then
    if [ "$(id -u)" -eq 0 ]; then
        sudo=()
    elif command -v sudo >/dev/null 2>&1; then
        sudo=(sudo)
    else
        echo "setup-tools: ${need_apt[*]} missing and no root or sudo to install it" >&2
        exit 1
    fi
    echo "setup-tools: installing ${need_apt[*]} (apt-get)" >&2
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >/dev/null
fi
