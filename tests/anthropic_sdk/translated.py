"""Drives the gateway's /api/v1/messages over a model of another API (an
`openai`-kind provider) with the official Python SDK (`anthropic`, the
version pinned in scripts/setup-tools.sh), unchanged but for its base URL
and key, with strict response validation: today's Messages fields
translated (docs/dialects.md), the answer translated back.

Prints `usage NAME <json>` for each message, in the order they are made
(the Rust test, tests/it/messages_native.rs, checks each against its usage
record), and `ok NAME` per check.

Run with GATEWAY_BASE_URL (the gateway's `/api`), GATEWAY_KEY (a gateway
API key) and GATEWAY_MODEL (an `openai` provider's chat model).
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


# Structured output: `output_config` (sent in `extra_body`: the pinned SDK
# predates the parameter) becomes `response_format` json_schema, which the
# provider honours.
schema = {
    "type": "object",
    "properties": {
        "city": {"type": "string"},
        "days": {"type": "integer", "minimum": 2},
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
assert set(doc) == {"city", "days"}, doc
assert isinstance(doc["city"], str) and isinstance(doc["days"], int), doc
assert doc["days"] >= 2, doc
assert m.stop_reason == "end_turn", m
usage("json_schema", m.usage)
print("ok output_config")

# System-role messages inside `messages`, and a stop sequence: the
# provider cannot say one ended the reply (docs/dialects.md), so the
# answer ends `end_turn`.
m = client.messages.create(
    model=MODEL,
    max_tokens=8,
    stop_sequences=["zebra"],
    messages=[{"role": "system", "content": "Be brief."}] + HELLO,
)
assert m.content[0].type == "text" and m.content[0].text, m
assert m.stop_reason in ("max_tokens", "end_turn") and m.stop_sequence is None, m
usage("system_role", m.usage)
print("ok system_role")

# A field with no equivalent on this provider is refused, naming it.
try:
    client.messages.create(
        model=MODEL,
        max_tokens=8,
        messages=HELLO,
        extra_body={"context_management": {"edits": []}},
    )
    raise AssertionError("context_management was not refused")
except anthropic.BadRequestError as e:
    assert "context_management" in str(e), e
print("ok refused")
