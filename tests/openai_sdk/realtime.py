"""Drives the gateway's realtime door (/api/v1/realtime) with OpenAI's
official Python SDK (`openai` with its `websockets` extra, the versions
pinned in scripts/setup-tools.sh): `client.realtime.connect`, unchanged but
for its base URL and key. Three text turns, then an audio turn (a second of
PCM16 appended in two pieces, committed). Prints `ok NAME {json}` per turn:
the usage the SDK parsed from `response.done`, its `cost`, and the balance
read from `/api/v1/credits` the moment `response.done` arrived (already
debited: the turn was billed before its event left the gateway).

Run by tests/it/realtime.rs with GATEWAY_BASE_URL (the gateway's
`/api/v1`), GATEWAY_KEY and GATEWAY_MODEL.
"""

import base64
import json
import os
import urllib.request

from openai import OpenAI

BASE = os.environ["GATEWAY_BASE_URL"]
KEY = os.environ["GATEWAY_KEY"]
client = OpenAI(base_url=BASE, api_key=KEY, max_retries=0)


def balance():
    req = urllib.request.Request(BASE + "/credits", headers={"Authorization": "Bearer " + KEY})
    with urllib.request.urlopen(req) as r:
        return json.load(r)["balance"]


def report(name, done):
    u = done.response.usage
    extra = u.model_extra or {}
    v = {
        "status": done.response.status,
        "usage": u.model_dump(exclude_none=True),
        "cost": f"{extra['cost']:.8f}",
        "balance": balance(),
    }
    print("ok", name, json.dumps(v), flush=True)


def until_done(conn, seen=None):
    for event in conn:
        if seen is not None:
            seen.add(event.type)
        if event.type == "error":
            raise SystemExit(f"error event: {event}")
        if event.type == "response.done":
            return event
    raise SystemExit("the session ended before response.done")


with client.realtime.connect(model=os.environ["GATEWAY_MODEL"]) as conn:
    created = conn.recv()
    assert created.type == "session.created", created
    conn.session.update(
        session={"type": "realtime", "output_modalities": ["text"], "instructions": "Be brief."}
    )
    for event in conn:
        if event.type == "session.updated":
            break
    for i, text in enumerate(["Hello there", "What is the weather", "Thanks a lot"], 1):
        conn.conversation.item.create(
            item={
                "type": "message",
                "role": "user",
                "content": [{"type": "input_text", "text": text}],
            }
        )
        conn.response.create()
        done = until_done(conn)
        assert done.response.output, done
        report(f"turn{i}", done)
    pcm = base64.b64encode(bytes(24_000)).decode()
    conn.input_audio_buffer.append(audio=pcm)
    conn.input_audio_buffer.append(audio=pcm)
    conn.input_audio_buffer.commit()
    conn.response.create(response={"output_modalities": ["audio"]})
    seen = set()
    done = until_done(conn, seen)
    assert "response.output_audio.delta" in seen, seen
    report("audio", done)
