"""Drives the gateway's /api/v1/messages over an `anthropic` provider with
the official Python SDK (`anthropic`, the version pinned in
scripts/setup-tools.sh), unchanged but for its base URL and key, with
strict response validation: today's Messages API passed through as sent.

Prints `usage NAME <json>` for each message, in the order they are made
(the Rust test, tests/it/messages_native.rs, checks each against its usage
record), `request_id <id>`, `count <json>` and `ok NAME` per check.

The pinned SDK predates `output_config` as a parameter: it is sent in
`extra_body`, the same JSON a newer SDK sends.

Run with GATEWAY_BASE_URL (the gateway's `/api`), GATEWAY_KEY (a gateway
API key) and GATEWAY_MODEL (an `anthropic` provider's model).
"""

import json
import os

import anthropic

client = anthropic.Anthropic(
    base_url=os.environ["GATEWAY_BASE_URL"],
    api_key=os.environ["GATEWAY_KEY"],
    max_retries=0,
    _strict_response_validation=True,
)
MODEL = os.environ["GATEWAY_MODEL"]
HELLO = [{"role": "user", "content": "Hello there"}]


def usage(name, u):
    print("usage", name, json.dumps(u.model_dump()))


# A ~200-token system prompt marked for the cache: written, then read.
SYSTEM = [
    {
        "type": "text",
        "text": " ".join(f"rule{i}" for i in range(200)),
        "cache_control": {"type": "ephemeral"},
    }
]
first = client.messages.create(
    model=MODEL, max_tokens=20, system=SYSTEM, messages=HELLO
)
assert first.usage.cache_creation_input_tokens == 200, first.usage
assert first.usage.cache_read_input_tokens == 0, first.usage
usage("cache_write", first.usage)
again = client.messages.create(
    model=MODEL, max_tokens=20, system=SYSTEM, messages=HELLO
)
assert again.usage.cache_read_input_tokens == 200, again.usage
assert again.usage.cache_creation_input_tokens == 0, again.usage
usage("cache_read", again.usage)
print("ok cache")

# Structured output: the text is a JSON document valid for the schema.
schema = {
    "type": "object",
    "properties": {
        "city": {"type": "string"},
        "days": {"type": "integer", "minimum": 2},
        "tags": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["city", "days"],
    "additionalProperties": False,
}
m = client.messages.create(
    model=MODEL,
    max_tokens=50,
    messages=HELLO,
    extra_body={"output_config": {"format": {"type": "json_schema", "schema": schema}}},
)
doc = json.loads(m.content[0].text)
assert set(doc) <= set(schema["properties"]) and {"city", "days"} <= set(doc), doc
assert isinstance(doc["city"], str) and isinstance(doc["days"], int), doc
assert doc["days"] >= 2, doc
usage("json_schema", m.usage)
print("ok output_config")

# A stop sequence cuts the text and is named.
m = client.messages.create(
    model=MODEL, max_tokens=50, stop_sequences=["simulated"], messages=HELLO
)
assert m.stop_reason == "stop_sequence" and m.stop_sequence == "simulated", m
assert "simulated" not in m.content[0].text, m
usage("stop_sequence", m.usage)
print("ok stop_sequence")

# Adaptive thinking, streamed: the thinking deltas reach the SDK.
thinking_deltas = []
with client.messages.stream(
    model=MODEL, max_tokens=40, thinking={"type": "adaptive"}, messages=HELLO
) as stream:
    for event in stream:
        if event.type == "content_block_delta" and event.delta.type == "thinking_delta":
            thinking_deltas.append(event.delta.thinking)
    final = stream.get_final_message()
assert thinking_deltas, "no thinking_delta"
assert final.content[0].type == "thinking", final
assert final.content[0].thinking == "".join(thinking_deltas), final
assert final.content[0].signature, final
assert final.content[1].type == "text", final
usage("adaptive_stream", final.usage)
print("ok thinking")

# System-role messages, a beta header (the SDK's beta path, `?beta=true`),
# and the request id of the answer: the gateway's.
raw = client.beta.messages.with_raw_response.create(
    model=MODEL,
    max_tokens=10,
    betas=["context-management-2025-06-27"],
    messages=[{"role": "system", "content": "Be brief."}] + HELLO,
)
m = raw.parse()
assert m._request_id and m._request_id == raw.headers["x-request-id"], (
    m._request_id,
    raw.headers,
)
print("request_id", m._request_id)
usage("system_role", m.usage)
print("ok system_role")

count = client.messages.count_tokens(model=MODEL, system=SYSTEM, messages=HELLO)
assert count.input_tokens == 202, count
print("count", json.dumps(count.model_dump()))
print("ok count_tokens")
