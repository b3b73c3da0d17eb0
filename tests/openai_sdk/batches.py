"""Drives the gateway's Batch API (/api/v1/batches) with OpenAI's official
Python SDK (`openai`, the version pinned in scripts/setup-tools.sh),
unchanged but for its base URL and key: a 1,000-line chat batch mixing
models of three provider kinds (and a few lines the provider refuses when
they run), uploaded with `files.create`, made with `batches.create`,
polled with `batches.retrieve` to `completed`, listed, and its output and
error files read with `files.content`. Prints `ok NAME {json}` per check;
`ok output` and `ok errors` map each `custom_id` to its line's
`request_id` (the Rust test checks each line's usage record).

Run by tests/it/batches.rs with GATEWAY_BASE_URL (the gateway's `/api/v1`),
GATEWAY_KEY and BATCH_LINES.
"""

import json
import os
import time

from openai import OpenAI

client = OpenAI(
    base_url=os.environ["GATEWAY_BASE_URL"],
    api_key=os.environ["GATEWAY_KEY"],
    max_retries=0,
)

MODELS = ["sim/sim-gpt", "claude/claude-sim", "gem/gemini-sim"]
n = int(os.environ.get("BATCH_LINES", "1000"))
lines = []
for i in range(n):
    body = {"model": MODELS[i % 3], "max_tokens": 16,
            "messages": [{"role": "user", "content": f"Say hello to number {i}"}]}
    if i % 100 == 99:
        # The provider refuses this key when the line runs: an error line.
        body = dict(body, model="sim/sim-gpt", byok_api_key="sk-wrong-key-0123456789")
    lines.append({"custom_id": f"req-{i}", "method": "POST",
                  "url": "/v1/chat/completions", "body": body})
data = "".join(json.dumps(l) + "\n" for l in lines).encode()

f = client.files.create(file=("batch.jsonl", data), purpose="batch")
batch = client.batches.create(
    input_file_id=f.id,
    endpoint="/v1/chat/completions",
    completion_window="24h",
    metadata={"run": "sdk"},
)
assert batch.object == "batch" and batch.status == "in_progress", batch
assert batch.input_file_id == f.id and batch.metadata == {"run": "sdk"}, batch
print("ok create", json.dumps({"id": batch.id}), flush=True)

deadline = time.time() + 300
while batch.status not in ("completed", "failed", "expired", "cancelled"):
    assert time.time() < deadline, batch
    time.sleep(0.5)
    batch = client.batches.retrieve(batch.id)
assert batch.status == "completed", batch
counts = batch.request_counts
assert counts.total == n, counts
assert batch.completed_at is not None and batch.in_progress_at is not None, batch
cost = (batch.model_extra or {}).get("cost")
print("ok completed", json.dumps({"total": counts.total, "completed": counts.completed,
                                  "failed": counts.failed, "cost": cost}), flush=True)

listed = [b.id for b in client.batches.list(limit=10)]
assert batch.id in listed, listed
print("ok list", json.dumps({"ids": listed}), flush=True)


def read(file_id):
    if file_id is None:
        return {}
    out = {}
    for line in client.files.content(file_id).text.splitlines():
        v = json.loads(line)
        out[v["custom_id"]] = v
    return out


output = read(batch.output_file_id)
errors = read(batch.error_file_id)
for custom_id, v in output.items():
    r = v["response"]
    assert r["status_code"] == 200 and r["body"]["object"] == "chat.completion", v
for custom_id, v in errors.items():
    assert v["response"]["status_code"] >= 400, v
print("ok output", json.dumps({k: v["response"]["request_id"] for k, v in output.items()}), flush=True)
print("ok errors", json.dumps({k: v["response"]["status_code"] for k, v in errors.items()}), flush=True)
