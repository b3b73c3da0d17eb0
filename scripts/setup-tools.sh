#!/usr/bin/env bash
# Tools the test command needs besides cargo, installed from Debian when
# missing (idempotent: what is installed is skipped). Called by
# scripts/test.sh; safe to run by hand.
#
#   chromium      renders /docs in a headless browser (tests/it/observe.rs)
#   redis-server  the Redis of the scale-out tests (tests/it/scaleout.rs,
#                 runtime's ratelimit::redis_tests): started on 127.0.0.1:6379,
#                 keeping nothing on disk, when nothing answers there
#   schemathesis  (PyPI, pinned) fuzzes /openapi.json (scripts/schemathesis.sh)
#   anthropic     (PyPI, pinned) the official Python SDK driving /api/v1/messages
#                 (tests/anthropic_sdk/check.py, run by tests/it/messages.rs)
#   litellm       (PyPI, pinned) litellm's client driving /api/v1/chat/completions
#                 (tests/litellm_client/check.py, run by tests/it/clients.rs)
#   ai, @ai-sdk/openai-compatible (npm, pinned by tests/ai_sdk/package-lock.json)
#                 the AI SDK's embed/embedMany (tests/ai_sdk/check.mjs, run by
#                 tests/it/clients.rs)
#   openai        (PyPI, pinned) OpenAI's official Python SDK driving /api/v1/responses
#                 (tests/openai_sdk/responses.py, run by tests/it/responses.rs); after
#                 litellm, whose range (openai>=2.20,<4) it is in
#   websockets    (PyPI, pinned) the `openai[realtime]` extra: the SDK's
#                 client.realtime.connect (tests/openai_sdk/realtime.py, run by
#                 tests/it/realtime.rs)
#   google-genai  (PyPI, pinned) Google's official Python SDK driving /api/v1/gemini
#                 (tests/genai_sdk/check.py, run by tests/it/gemini_door.rs)
#   oauth2-mock-server (npm, pinned by tests/oidc/package-lock.json) the
#                 OpenID Connect provider of the sign-in tests (tests/it/oauth.rs),
#                 run by node (v20.19 or later; Debian's nodejs and npm when missing)
#   playwright-core (npm, pinned by tests/dashboard/package-lock.json) drives
#                 Debian's chromium through the dashboard (tests/it/dashboard.rs);
#                 it downloads no browser
set -euo pipefail

SCHEMATHESIS_VERSION=4.32.5
ANTHROPIC_SDK_VERSION=0.76.0
LITELLM_VERSION=1.110.2
GENAI_SDK_VERSION=3.6.1
OPENAI_SDK_VERSION=3.57.0
MCP_SDK_VERSION=2.3.0
WEBSOCKETS_VERSION=15.0.1
export PATH="$HOME/.local/bin:$PATH"

need_apt=()
command -v chromium >/dev/null 2>&1 || need_apt+=(chromium)
command -v redis-server >/dev/null 2>&1 || need_apt+=(redis-server)
command -v python3 >/dev/null 2>&1 || need_apt+=(python3)
python3 -m pip --version >/dev/null 2>&1 || need_apt+=(python3-pip)
command -v node >/dev/null 2>&1 || need_apt+=(nodejs)
command -v npm >/dev/null 2>&1 || need_apt+=(npm)

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

if ! redis-cli -h 127.0.0.1 -p 6379 ping >/dev/null 2>&1; then
    echo "setup-tools: starting redis-server on 127.0.0.1:6379" >&2
    redis_dir="${TMPDIR:-/tmp}/gateway-test-redis"
    mkdir -p "$redis_dir"
    redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save "" --appendonly no \
        --dir "$redis_dir" --logfile "$redis_dir/redis.log"
    for _ in $(seq 50); do
        redis-cli -h 127.0.0.1 -p 6379 ping >/dev/null 2>&1 && break
        sleep 0.1
    done
fi

if [ "$(st --version 2>/dev/null || true)" != "st, version $SCHEMATHESIS_VERSION" ]; then
    echo "setup-tools: installing schemathesis $SCHEMATHESIS_VERSION (pip)" >&2
    python3 -m pip install -q "schemathesis==$SCHEMATHESIS_VERSION" 2>/dev/null ||
        python3 -m pip install -q --user --break-system-packages "schemathesis==$SCHEMATHESIS_VERSION"
fi

if [ "$(python3 -c 'import anthropic; print(anthropic.__version__)' 2>/dev/null || true)" != "$ANTHROPIC_SDK_VERSION" ]; then
    echo "setup-tools: installing anthropic $ANTHROPIC_SDK_VERSION (pip)" >&2
    python3 -m pip install -q "anthropic==$ANTHROPIC_SDK_VERSION" 2>/dev/null ||
        python3 -m pip install -q --user --break-system-packages "anthropic==$ANTHROPIC_SDK_VERSION"
fi

if [ "$(python3 -c 'from importlib.metadata import version; print(version("litellm"))' 2>/dev/null || true)" != "$LITELLM_VERSION" ]; then
    echo "setup-tools: installing litellm $LITELLM_VERSION (pip)" >&2
    python3 -m pip install -q "litellm==$LITELLM_VERSION" 2>/dev/null ||
        python3 -m pip install -q --user --break-system-packages "litellm==$LITELLM_VERSION"
fi

if [ "$(python3 -c 'import openai; print(openai.__version__)' 2>/dev/null || true)" != "$OPENAI_SDK_VERSION" ]; then
    echo "setup-tools: installing openai $OPENAI_SDK_VERSION (pip)" >&2
    python3 -m pip install -q "openai==$OPENAI_SDK_VERSION" 2>/dev/null ||
        python3 -m pip install -q --user --break-system-packages "openai==$OPENAI_SDK_VERSION"
fi

if [ "$(python3 -c 'from importlib.metadata import version; print(version("mcp"))' 2>/dev/null || true)" != "$MCP_SDK_VERSION" ]; then
    echo "setup-tools: installing mcp $MCP_SDK_VERSION (pip: the MCP gateway's client and servers)" >&2
    python3 -m pip install -q "mcp==$MCP_SDK_VERSION" 2>/dev/null ||
        python3 -m pip install -q --user --break-system-packages "mcp==$MCP_SDK_VERSION"
fi

if [ "$(python3 -c 'import websockets; print(websockets.__version__)' 2>/dev/null || true)" != "$WEBSOCKETS_VERSION" ]; then
    echo "setup-tools: installing websockets $WEBSOCKETS_VERSION (pip)" >&2
    python3 -m pip install -q "websockets==$WEBSOCKETS_VERSION" 2>/dev/null ||
        python3 -m pip install -q --user --break-system-packages "websockets==$WEBSOCKETS_VERSION"
fi

if [ "$(python3 -c 'from google import genai; print(genai.__version__)' 2>/dev/null || true)" != "$GENAI_SDK_VERSION" ]; then
    echo "setup-tools: installing google-genai $GENAI_SDK_VERSION (pip)" >&2
    python3 -m pip install -q "google-genai==$GENAI_SDK_VERSION" 2>/dev/null ||
        python3 -m pip install -q --user --break-system-packages "google-genai==$GENAI_SDK_VERSION"
fi

oidc_dir="$(dirname "$0")/../tests/oidc"
if [ ! -f "$oidc_dir/node_modules/oauth2-mock-server/package.json" ]; then
    echo "setup-tools: installing oauth2-mock-server (npm ci in tests/oidc)" >&2
    (cd "$oidc_dir" && npm ci --no-audit --no-fund --loglevel=error)
fi

dashboard_dir="$(dirname "$0")/../tests/dashboard"
if [ ! -f "$dashboard_dir/node_modules/playwright-core/package.json" ]; then
    echo "setup-tools: installing playwright-core (npm ci in tests/dashboard)" >&2
    (cd "$dashboard_dir" && npm ci --no-audit --no-fund --loglevel=error)
fi

ai_sdk_dir="$(dirname "$0")/../tests/ai_sdk"
if [ ! -f "$ai_sdk_dir/node_modules/ai/package.json" ]; then
    echo "setup-tools: installing the AI SDK (npm ci in tests/ai_sdk)" >&2
    (cd "$ai_sdk_dir" && npm ci --no-audit --no-fund --loglevel=error)
fi
