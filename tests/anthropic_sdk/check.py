"""Drives the gateway's /api/v1/messages with the official Python SDK
(`anthropic`, the version pinned in scripts/setup-tools.sh), unchanged but
for its base URL and key, with strict response validation: a plain message,
a streamed one, a tool round trip, count_tokens. Prints `ok NAME` per check.

Run by tests/it/messages.rs with GATEWAY_BASE_URL (the gateway's `/api`:
the SDK adds `/v1/messages`) and GATEWAY_KEY (a gateway API key), and by
tests/it/adapter_anthropic.rs with GATEWAY_MODEL too.
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
# Any chat model: an `openai` provider's by default, GATEWAY_MODEL for
# another (tests/it/adapter_anthropic.rs: an `anthropic` provider's).
MODEL = os.environ.get("GATEWAY_MODEL", "sim/sim-gpt")

m = client.messages.create(
    model=MODEL,
    max_tokens=5,
    system="Be brief.",
    messages=[{"role": "user", "content": "Hello there"}],
)
assert m.type == "message" and m.role == "assistant", m
assert m.content[0].type == "text" and len(m.content[0].text.split()) == 5, m
assert m.stop_reason == "max_tokens", m
assert m.usage.output_tokens == 5 and m.usage.input_tokens > 0, m.usage
print("ok plain")

with client.messages.stream(
    model=MODEL,
    max_tokens=4,
    messages=[{"role": "user", "content": "Hello there"}],
) as stream:
    pieces = [t for t in stream.text_stream]
    final = stream.get_final_message()
assert len(pieces) == 4, pieces
assert final.content[0].text == "".join(pieces), final
assert final.stop_reason == "max_tokens", final
assert final.usage.output_tokens == 4 and final.usage.input_tokens > 0, final.usage
print("ok stream")

tools = [
    {
        "name": "get_weather",
        "description": "The weather of a city",
        "input_schema": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    }
]
question = {"role": "user", "content": "Please get_weather for Oslo"}
with client.messages.stream(
    model=MODEL, max_tokens=50, tools=tools, messages=[question]
) as stream:
    call = stream.get_final_message()
assert call.stop_reason == "tool_use", call
use = [b for b in call.content if b.type == "tool_use"][0]
assert use.name == "get_weather" and use.input == {"city": "sim"}, use
answer = client.messages.create(
    model=MODEL,
    max_tokens=6,
    tools=tools,
    messages=[
        question,
        {"role": "assistant", "content": call.content},
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": use.id, "content": "Rain"}
            ],
        },
    ],
)
assert answer.content[0].type == "text", answer
print("ok tools")

count = client.messages.count_tokens(
    model=MODEL, messages=[{"role": "user", "content": "Hello there"}]
)
assert count.input_tokens > 0, count
print("ok count_tokens", json.dumps(count.model_dump()))
