"""Drives the gateway's Files API (/api/v1/files) with OpenAI's official
Python SDK (`openai`, the version pinned in scripts/setup-tools.sh),
unchanged but for its base URL and key: create (a JSONL batch input),
list, retrieve, content, delete, and a deleted file's 404. Prints
`ok NAME {json}` per check.

Run by tests/it/files.rs with GATEWAY_BASE_URL (the gateway's `/api/v1`)
and GATEWAY_KEY.
"""

import json
import os

import openai
from openai import OpenAI

client = OpenAI(
    base_url=os.environ["GATEWAY_BASE_URL"],
    api_key=os.environ["GATEWAY_KEY"],
    max_retries=0,
)

lines = [
    {"custom_id": f"line-{i}", "method": "POST", "url": "/v1/chat/completions",
     "body": {"model": "sim/sim-gpt", "messages": [{"role": "user", "content": f"Hello {i}"}]}}
    for i in range(100)
]
data = "".join(json.dumps(l) + "\n" for l in lines).encode()

f = client.files.create(file=("lines.jsonl", data), purpose="batch")
assert f.object == "file" and f.purpose == "batch" and f.bytes == len(data), f
assert f.filename == "lines.jsonl" and f.id.startswith("file-"), f
# A batch file expires after 30 days unless told otherwise (OpenAI's rule).
assert f.expires_at == f.created_at + 30 * 86400, f
print("ok create", json.dumps({"id": f.id, "bytes": f.bytes}), flush=True)

other = client.files.create(file=("notes.txt", b"hello"), purpose="user_data")
assert other.expires_at is None, other
hourly = client.files.create(
    file=("hour.jsonl", b"{}\n"),
    purpose="batch",
    expires_after={"anchor": "created_at", "seconds": 3600},
)
assert hourly.expires_at == hourly.created_at + 3600, hourly
client.files.delete(hourly.id)
print("ok expires", json.dumps({"id": hourly.id}), flush=True)
batch_ids = [x.id for x in client.files.list(purpose="batch")]
assert batch_ids == [f.id], batch_ids
every = [x.id for x in client.files.list(order="asc")]
assert every == [f.id, other.id], every
print("ok list", json.dumps({"ids": every}), flush=True)

got = client.files.retrieve(f.id)
assert got.id == f.id and got.bytes == len(data), got
content = client.files.content(f.id).read()
assert content == data, (len(content), len(data))
print("ok content", json.dumps({"bytes": len(content)}), flush=True)

d = client.files.delete(f.id)
assert d.deleted and d.id == f.id, d
try:
    client.files.retrieve(f.id)
    raise SystemExit("a deleted file was retrieved")
except openai.NotFoundError as e:
    assert "No such File object" in str(e), e
print("ok delete", json.dumps({"id": f.id, "other": other.id}), flush=True)
