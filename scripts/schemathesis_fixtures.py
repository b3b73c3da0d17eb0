"""Valid state for the operations a generated call cannot reach alone
(scripts/schemathesis_hooks.py applies it to a share of their calls).

A generated path parameter is never the id of something that exists, a
generated multipart file is never real audio or an image, a generated
password is never a registered user's, a generated confirmation token was
never mailed. For those operations the hooks rewrite every FIXTURE_EVERY-th
call (at most FIXTURE_MAX) into a valid one: the ids of resources made here
through the API (fresh for each call: the fuzzer deletes too), a real WAV
or PNG file, a registered user's credentials, the token of the mail in the
demo's outbox, the id of a stream that is open. The other calls stay as
generated, and so does the whole stateful phase (the document's links).

Each rewrite is a function `(case, kwargs)` in REWRITES, keyed by
operationId; `case` is changed in place (path parameters, body), `kwargs`
(the transport's) only for a multipart or raw body.
"""

import glob
import hashlib
import hmac
import io
import itertools
import json
import os
import struct
import sys
import threading
import time
import uuid
import wave
import zlib

import requests

BASE = os.environ["ST_BASE"]
KEY = os.environ["ST_KEY"]
ADMIN_KEY = os.environ["ST_ADMIN_KEY"]
DATA_DIR = os.environ.get("ST_DATA_DIR", "")
# The demo's Stripe webhook signing secret: a test-mode constant of
# server/src/demo.rs shared with its simulator, not a secret of any
# deployment (ST_STRIPE_WEBHOOK_SECRET overrides it).
STRIPE_WEBHOOK_SECRET = os.environ.get("ST_STRIPE_WEBHOOK_SECRET", "whsec_demo_gateway")
# The demo's inbound webhook secret (app/src/demo.rs); ST_PROVIDER_WEBHOOK_SECRET
# overrides it.
PROVIDER_WEBHOOK_SECRET = os.environ.get("ST_PROVIDER_WEBHOOK_SECRET", "demo-provider-webhook-secret")
# One call in this many of each operation below is made valid, at most
# FIXTURE_MAX of them (each costs a few calls of its own: a registration
# hashes a password).
FIXTURE_EVERY = int(os.environ.get("ST_FIXTURE_EVERY", "3"))
FIXTURE_MAX = int(os.environ.get("ST_FIXTURE_MAX", "5"))

_lock = threading.RLock()
_serial = itertools.count(1)


def _api(method, path, **kw):
    headers = kw.pop("headers", {"Authorization": f"Bearer {KEY}"})
    r = requests.request(method, f"{BASE}/api/v1{path}", headers=headers, timeout=60, **kw)
    r.raise_for_status()
    return r.json() if r.content else {}


def _admin(method, path, **kw):
    return _api(method, path, headers={"X-Admin-Key": ADMIN_KEY}, **kw)


def wav_bytes(seconds=0.2, rate=8000):
    """A short silent mono 16-bit WAV."""
    buf = io.BytesIO()
    with wave.open(buf, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(b"\0\0" * int(seconds * rate))
    return buf.getvalue()


def png_bytes():
    """A 1x1 PNG."""

    def chunk(kind, data):
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    ihdr = struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)
    idat = zlib.compress(b"\0\xff\xff\xff")
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", idat) + chunk(b"IEND", b"")


def _multipart(case, kwargs, files, data):
    """Replaces the generated body by this multipart form (the encoder
    chooses the boundary, so no generated Content-Type is kept)."""
    kwargs["files"] = files
    kwargs["data"] = data
    if case.headers:
        for name in [h for h in case.headers if h.lower() == "content-type"]:
            del case.headers[name]


def _unique():
    return f"fz{os.getpid()}x{next(_serial)}x{uuid.uuid4().hex[:6]}"


# ---- resources ------------------------------------------------------------


def _upload_url():
    files = {"file": ("voice.wav", wav_bytes(), "audio/wav")}
    return _api("POST", "/voice/uploads", files=files, data={"purpose": "voice_clone"})["url"]


def _voice():
    body = {"name": "fixture", "consent_text": "I agree to the cloning of my voice"}
    return _api("POST", "/voice/voices", json=body)["item"]["uuid"]


def _recording():
    voice = _voice()
    body = {"fields": {"audio_url": _upload_url(), "name": "take"}}
    return voice, _api("POST", f"/voice/voices/{voice}/recordings", json=body)["item"]["uuid"]


def _project():
    return _api("POST", "/voice/projects", json={"fields": {"name": "fixture"}})["item"]["uuid"]


def _clip():
    project = _project()
    fields = {"title": "t", "body": "Some text.", "voice_uuid": "stock-voice-1"}
    return project, _api("POST", f"/voice/projects/{project}/clips", json={"fields": fields})["item"]["uuid"]


def _file():
    """A file of the Files API: one batch line (the demo's chat model)."""
    line = {"custom_id": "fx", "method": "POST", "url": "/v1/chat/completions",
            "body": {"model": "sim/sim-gpt", "max_tokens": 8,
                     "messages": [{"role": "user", "content": "hi"}]}}
    files = {"file": ("lines.jsonl", (json.dumps(line) + "\n").encode(), "application/jsonl")}
    return _api("POST", "/files", files=files, data={"purpose": "batch"})["id"]


def _batch():
    """A batch of that file (in progress, or done: a cancel answers either)."""
    body = {"input_file_id": _file(), "endpoint": "/v1/chat/completions", "completion_window": "24h"}
    return _api("POST", "/batches", json=body)["id"]


def _request_id():
    """The id of a chat request of the demo user's (its usage is recorded)."""
    body = {"model": "sim/sim-gpt", "max_tokens": 8, "messages": [{"role": "user", "content": "hi"}]}
    r = requests.post(f"{BASE}/api/v1/chat/completions", json=body,
                      headers={"Authorization": f"Bearer {KEY}"}, timeout=60)
    r.raise_for_status()
    return r.headers["x-request-id"]


def _clip_create(case, kwargs):
    _path(case, project_uuid=_project())
    _body_fields(case, {"title": "t", "body": "Some text.", "voice_uuid": "stock-voice-1"})


def _batch_create(case, kwargs):
    case.body = {"input_file_id": _file(), "endpoint": "/v1/chat/completions", "completion_window": "24h"}


def _agent():
    return _api("POST", "/voice/agents", json={"fields": {"name": "fixture"}})["item"]["uuid"]


def _agent_child(kind, fields):
    agent = _agent()
    body = {"fields": {"agent_uuid": agent, **fields}}
    return _api("POST", f"/voice/{kind}", json=body)["item"]["uuid"]


def _tool():
    return _agent_child("agent-tools", {"name": "lookup"})


def _agent_webhook():
    return _agent_child("agent-webhooks", {"url": "https://example.com/hook"})


def _media():
    files = {"file": ("pixel.png", png_bytes(), "image/png")}
    return _api("POST", "/media", files=files, data={"file_type": "image"})["id"]


def _account(confirmed=True):
    """A registered account: (id, username, email, password); the run
    requires confirmation (GATEWAY_REQUIRE_EMAIL_CONFIRMATION), so it is
    confirmed with its mailed token unless `confirmed` is false."""
    name = _unique()
    email = f"{name}@example.com"
    password = f"password-of-{name}"
    body = {"username": name, "email": email, "password": password, "accept_privacy_policy": True}
    r = requests.post(f"{BASE}/api/v1/auth/register", json=body, timeout=60)
    r.raise_for_status()
    if confirmed:
        token = _mailed_token(email)
        requests.post(f"{BASE}/api/v1/auth/confirm", json={"token": token}, timeout=60).raise_for_status()
    return str(r.json()["id"]), name, email, password


def _mailed_token(email):
    """The token of the newest message to `email` in the demo's outbox."""
    for _ in range(50):
        for path in sorted(glob.glob(os.path.join(DATA_DIR, "outbox", "*")), reverse=True):
            with open(path, encoding="utf-8", errors="replace") as f:
                text = f.read()
            if f"To: {email}" in text:
                for line in text.splitlines():
                    if line.startswith("Token: "):
                        return line[len("Token: ") :].strip()
        time.sleep(0.1)
    raise RuntimeError(f"no mail to {email} in {DATA_DIR}/outbox")


# ---- rewrites -------------------------------------------------------------


def _path(case, **values):
    params = case.path_parameters if case.path_parameters is not None else {}
    params.update(values)
    case.path_parameters = params


def _body_fields(case, fields):
    body = case.body if isinstance(case.body, dict) else {}
    inner = body.get("fields") if isinstance(body.get("fields"), dict) else {}
    body["fields"] = {**inner, **fields}
    case.body = body


def _recording_of(case, kwargs):
    voice, rec = _recording()
    _path(case, voice_uuid=voice, recording_uuid=rec)
    if case.method.upper() == "PUT":
        _body_fields(case, {"name": "renamed"})


def _clip_of(case, kwargs):
    project, clip = _clip()
    _path(case, project_uuid=project, clip_uuid=clip)


def _one(make, param, body=None):
    def rewrite(case, kwargs):
        _path(case, **{param: make()})
        if body is not None:
            _body_fields(case, body)

    return rewrite


def _user(case, kwargs):
    _path(case, user_id=_account(confirmed=False)[0])
    if case.method.upper() == "POST" and isinstance(case.body, dict):
        case.body["amount"] = "5.00"


def _audio_form(case, kwargs):
    files = {"file": ("speech.wav", wav_bytes(), "audio/wav")}
    _multipart(case, kwargs, files, {"response_format": "json"})


def _upload_form(case, kwargs):
    files = {"file": ("speech.wav", wav_bytes(), "audio/wav")}
    _multipart(case, kwargs, files, {"purpose": "stt_input"})


def _media_form(case, kwargs):
    files = {"file": ("pixel.png", png_bytes(), "image/png")}
    _multipart(case, kwargs, files, {"file_type": "image"})


def _register(case, kwargs):
    name = _unique()
    case.body = {
        "username": name,
        "email": f"{name}@example.com",
        "password": f"password-of-{name}",
        "accept_privacy_policy": True,
    }


def _login(case, kwargs):
    _, name, _, password = _account()
    case.body = {"username": name, "password": password}


def _refresh(case, kwargs):
    _, name, _, password = _account()
    r = requests.post(
        f"{BASE}/api/v1/auth/login", json={"username": name, "password": password}, timeout=60
    )
    r.raise_for_status()
    case.body = {"refresh_token": r.json()["refresh_token"]}


def _confirm(case, kwargs):
    _, _, email, _ = _account(confirmed=False)
    case.body = {"token": _mailed_token(email)}


def _model(case, kwargs):
    _path(case, provider_id="sim", model_id="sim-gpt")


_open_streams = {}


def _open_stream(case, kwargs):
    """Starts a streaming chat (held open until the call is answered, see
    close_stream) and names its X-Stream-Id."""
    body = {"messages": [{"role": "user", "content": "Tell a long story"}], "stream": True, "max_tokens": 4000}
    r = requests.post(
        f"{BASE}/api/v1/chat/completions",
        json=body,
        headers={"Authorization": f"Bearer {KEY}"},
        stream=True,
        timeout=60,
    )
    r.raise_for_status()
    stream_id = r.headers["X-Stream-Id"]
    _path(case, stream_id=stream_id)
    _open_streams[id(case)] = r


def close_stream(case):
    r = _open_streams.pop(id(case), None)
    if r is not None:
        r.close()


def _checkout(case, kwargs):
    case.body = {
        "amount_usd": "10.00",
        "success_url": "https://example.com/paid",
        "cancel_url": "https://example.com/cancelled",
    }


def _key_update(case, kwargs):
    """A key of the demo user's own (made with the call's access token),
    given a budget."""
    auth = {"Authorization": (case.headers or {}).get("Authorization", "")}
    key = _api("POST", "/keys", headers=auth, json={"name": f"budget-{_unique()}"})
    _path(case, key_id=str(key["id"]))
    case.body = {"budget_usd": "5", "budget_period": "month"}


def _stripe_event(case, kwargs):
    """An event signed as Stripe signs (`t=<unix>,v1=<HMAC-SHA256 of "t.body">`)."""
    event = {
        "id": f"evt_{_unique()}",
        "type": "checkout.session.expired",
        "data": {"object": {"id": f"cs_{_unique()}"}},
    }
    raw = json.dumps(event).encode()
    t = str(int(time.time()))
    mac = hmac.new(STRIPE_WEBHOOK_SECRET.encode(), f"{t}.".encode() + raw, hashlib.sha256).hexdigest()
    headers = case.headers if case.headers is not None else {}
    headers["Stripe-Signature"] = f"t={t},v1={mac}"
    headers["Content-Type"] = "application/json"
    case.headers = headers
    kwargs["data"] = raw


def _provider_event(case, kwargs):
    """A provider notification signed as the provider signs
    (`X-Provider-Signature: sha256=<HMAC-SHA256 of the body>`): a job the
    gateway does not know, stored and answered 200."""
    event = {"event": "job.completed", "kind": "stt", "id": f"job_{_unique()}", "status": "completed"}
    raw = json.dumps(event).encode()
    mac = hmac.new(PROVIDER_WEBHOOK_SECRET.encode(), raw, hashlib.sha256).hexdigest()
    headers = case.headers if case.headers is not None else {}
    headers["X-Provider-Signature"] = f"sha256={mac}"
    headers["Content-Type"] = "application/json"
    case.headers = headers
    kwargs["data"] = raw


_org_cache = {}


def _price_version():
    """The price version that priced a chat (what its generation names)."""
    return _api("GET", f"/generations/{_request_id()}")["price_version"]

_throwaway = {}


def throwaway_token():
    """The access token of an account made to be deleted: every call of
    `DELETE /auth/me` carries it, never the run's own (a new one once a
    call deleted it, `forget_throwaway`)."""
    with _lock:
        if "token" not in _throwaway:
            _, _, email, password = _account()
            _throwaway.update(token=_token_of(email, password), password=password)
        return _throwaway["token"]


def forget_throwaway(case, response):
    if case.method.upper() == "DELETE" and case.path == "/api/v1/auth/me" and response.status_code == 200:
        with _lock:
            _throwaway.clear()


def _account_delete(case, kwargs):
    throwaway_token()
    case.body = {"password": _throwaway["password"]}


def _token_of(email, password):
    r = requests.post(f"{BASE}/api/v1/auth/login", json={"email": email, "password": password}, timeout=60)
    r.raise_for_status()
    return r.json()["access_token"]


def _org():
    """An organization and its owner's access token: a fresh account's,
    made once per run (no operation deletes an organization)."""
    with _lock:
        if "org" not in _org_cache:
            _, _, email, password = _account()
            token = _token_of(email, password)
            org = _api("POST", "/organizations", headers={"Authorization": f"Bearer {token}"},
                       json={"name": f"org-{_unique()}"})["id"]
            _org_cache["org"] = (str(org), token)
        return _org_cache["org"]


def _as_org_owner(case, **more):
    org, token = _org()
    headers = case.headers if case.headers is not None else {}
    headers["Authorization"] = f"Bearer {token}"
    case.headers = headers
    _path(case, org_id=org, **more)
    return org, token


def _org_plain(case, kwargs):
    _as_org_owner(case)


def _org_invite(case, kwargs):
    _as_org_owner(case)
    case.body = {"email": f"{_unique()}@example.com", "role": "member"}


def _org_key_create(case, kwargs):
    _as_org_owner(case)
    case.body = {"name": f"org-key-{_unique()}"}


def _org_key(case, kwargs):
    org, token = _org()
    key = _api("POST", f"/organizations/{org}/keys", headers={"Authorization": f"Bearer {token}"},
               json={"name": f"org-key-{_unique()}"})["id"]
    _as_org_owner(case, key_id=str(key))
    if case.method.upper() == "PATCH":
        case.body = {"budget_usd": "5", "budget_period": "month"}


def _org_invitation():
    """A fresh confirmed account invited into the run's organization: its
    id, access token and the mailed invitation's token."""
    org, owner = _org()
    uid, _, email, password = _account()
    _api("POST", f"/organizations/{org}/invitations", headers={"Authorization": f"Bearer {owner}"},
         json={"email": email, "role": "member"})
    return uid, _token_of(email, password), _mailed_token(email)


def _org_accept(case, kwargs):
    _, token, invitation = _org_invitation()
    headers = case.headers if case.headers is not None else {}
    headers["Authorization"] = f"Bearer {token}"
    case.headers = headers
    case.body = {"token": invitation}


def _org_member_remove(case, kwargs):
    uid, token, invitation = _org_invitation()
    _api("POST", "/organizations/invitations/accept", headers={"Authorization": f"Bearer {token}"},
         json={"token": invitation})
    _as_org_owner(case, member_id=uid)


REWRITES = {
    "admin.prices.get": _one(_price_version, "version"),
    "auth.me.delete": _account_delete,
    "orgs.invitations.create": _org_invite,
    "orgs.invitations.accept": _org_accept,
    "orgs.members.list": _org_plain,
    "orgs.members.remove": _org_member_remove,
    "orgs.keys.list": _org_plain,
    "orgs.keys.create": _org_key_create,
    "orgs.keys.update": _org_key,
    "orgs.keys.revoke": _org_key,
    "orgs.usage": _org_plain,
    "orgs.credits": _org_plain,
    "admin.users.credits": _user,
    "admin.users.usage": _user,
    "admin.users.enable": _user,
    "admin.users.disable": _user,
    "admin.users.delete": _user,
    "agent_tools.get": _one(_tool, "uuid"),
    "agent_tools.update": _one(_tool, "uuid", {"name": "renamed"}),
    "agent_tools.delete": _one(_tool, "uuid"),
    "agent_webhooks.get": _one(_agent_webhook, "uuid"),
    "agent_webhooks.update": _one(_agent_webhook, "uuid", {"url": "https://example.com/h2"}),
    "agent_webhooks.delete": _one(_agent_webhook, "uuid"),
    "recordings.get": _recording_of,
    "recordings.update": _recording_of,
    "recordings.delete": _recording_of,
    "clips.get": _clip_of,
    "clips.delete": _clip_of,
    "media.get": _one(_media, "media_id"),
    "media.delete": _one(_media, "media_id"),
    "media.upload": _media_form,
    "uploads.create": _upload_form,
    "audio.stt.transcriptions": _audio_form,
    "audio.stt.translations": _audio_form,
    "auth.register": _register,
    "auth.login": _login,
    "auth.refresh": _refresh,
    "auth.confirm": _confirm,
    "models.get": _model,
    "completions.stop_stream": _open_stream,
    "stripe.checkout": _checkout,
    "stripe.webhook": _stripe_event,
    "webhooks.provider": _provider_event,
    "keys.update": _key_update,
    "files.get": _one(_file, "file_id"),
    "files.content": _one(_file, "file_id"),
    "files.delete": _one(_file, "file_id"),
    "batches.create": _batch_create,
    "projects.get": _one(_project, "project_uuid"),
    "clips.list": _one(_project, "project_uuid"),
    "clips.create": _clip_create,
    "generations.get": _one(_request_id, "request_id"),
    "batches.get": _one(_batch, "batch_id"),
    "batches.cancel": _one(_batch, "batch_id"),
}

_calls = {}


def apply(operation_id, case, kwargs):
    """Rewrites every FIXTURE_EVERY-th call of an operation of REWRITES
    (the first included; FIXTURE_MAX at most) into a valid one."""
    rewrite = REWRITES.get(operation_id)
    meta = getattr(case, "meta", None)
    # The stateful phase follows the document's links alone (hypothesis
    # replays its scenarios, which a rewrite by call count would change).
    if rewrite is None or (meta is not None and str(meta.phase.name) == "stateful"):
        return
    with _lock:
        n = _calls.get(operation_id, 0)
        _calls[operation_id] = n + 1
    if n % FIXTURE_EVERY == 0 and n // FIXTURE_EVERY < FIXTURE_MAX:
        try:
            rewrite(case, kwargs)
        except Exception as e:  # the call goes as generated; the report shows it
            print(f"schemathesis fixture for {operation_id} failed: {e}", file=sys.stderr)
