"""Schemathesis hooks of scripts/schemathesis.sh (loaded through SCHEMATHESIS_HOOKS).

* Credentials per operation, from the operation's own `security` in
  /openapi.json (so routes added later get theirs): `bearerAuth` the demo
  user's API key, `accessToken` its access token, `adminKey` the run's
  admin key. A logout gets an access token of its own (through
  /auth/refresh), so the run's token stays valid; the access token is
  renewed the same way before it expires.
* The run's own credentials survive it: a generated `key_id` equal to the
  demo key's id, or an admin `user_id` equal to the demo user's on an
  operation that disables or deletes a user, is pointed at a spare user
  (or its key) that scripts/schemathesis.sh made for the purpose.
* The operations a generated call cannot reach alone (an existing id, a
  real audio or image file, a registered user's password, a mailed token,
  an open stream, a signed Stripe event) get valid state in a share of
  their calls (scripts/schemathesis_fixtures.py).
* Every answer is written, one JSON line each, to ST_REPORT (operation,
  status); scripts/schemathesis_report.py reads them.
"""

import json
import os
import threading
import time

import requests
import schemathesis

import schemathesis_fixtures

BASE = os.environ["ST_BASE"]
KEY = os.environ["ST_KEY"]
ADMIN_KEY = os.environ["ST_ADMIN_KEY"]
USER_ID = os.environ["ST_USER_ID"]
KEY_ID = os.environ["ST_KEY_ID"]
SPARE_USER_ID = os.environ["ST_SPARE_USER_ID"]
SPARE_KEY_ID = os.environ["ST_SPARE_KEY_ID"]
TTL = int(os.environ.get("ST_TOKEN_TTL", "900"))
REPORT = os.environ["ST_REPORT"]

_lock = threading.Lock()
_tokens = {
    "access": os.environ["ST_TOKEN"],
    "refresh": os.environ["ST_REFRESH"],
    "at": time.monotonic(),
}
_report = open(REPORT, "a", buffering=1)


def _refresh():
    """A new token pair from the refresh token (used once, then replaced)."""
    r = requests.post(
        f"{BASE}/api/v1/auth/refresh",
        json={"refresh_token": _tokens["refresh"]},
        timeout=30,
    )
    r.raise_for_status()
    pair = r.json()
    _tokens["refresh"] = pair["refresh_token"]
    return pair["access_token"]


def _access_token(own):
    with _lock:
        if own:
            return _refresh()
        if time.monotonic() - _tokens["at"] > TTL / 2:
            _tokens["access"] = _refresh()
            _tokens["at"] = time.monotonic()
        return _tokens["access"]


def _raw(case):
    return case.operation.definition.raw


@schemathesis.hook
def before_call(context, case, kwargs):
    op = _raw(case)
    mode = op.get("x-gateway", {}).get("mode", "")
    schemes = {name for requirement in op.get("security", []) for name in requirement}
    headers = case.headers if case.headers is not None else {}
    if "adminKey" in schemes:
        headers["X-Admin-Key"] = ADMIN_KEY
    elif "bearerAuth" in schemes:
        headers["Authorization"] = f"Bearer {KEY}"
    elif "accessToken" in schemes and mode == "account_delete":
        # Never the run's own account: one made to be deleted.
        headers["Authorization"] = f"Bearer {schemathesis_fixtures.throwaway_token()}"
    elif "accessToken" in schemes:
        headers["Authorization"] = f"Bearer {_access_token(own=mode == 'logout')}"
    case.headers = headers
    params = case.path_parameters or {}
    if params.get("key_id") == KEY_ID:
        params["key_id"] = SPARE_KEY_ID
    if mode in ("admin_disable", "admin_delete") and params.get("user_id") == USER_ID:
        params["user_id"] = SPARE_USER_ID
    schemathesis_fixtures.apply(op.get("operationId"), case, kwargs)


@schemathesis.hook
def after_call(context, case, response):
    schemathesis_fixtures.close_stream(case)
    schemathesis_fixtures.forget_throwaway(case, response)
    line = {
        "operation": _raw(case).get("operationId"),
        "label": case.operation.label,
        "status": response.status_code,
    }
    if response.status_code >= 500:
        line["body"] = response.text[:300]
    _report.write(json.dumps(line) + "\n")
