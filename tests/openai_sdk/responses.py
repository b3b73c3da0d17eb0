"""Drives the gateway's Responses API (/api/v1/responses) with OpenAI's
official Python SDK (`openai`, the version pinned in scripts/setup-tools.sh),
unchanged but for its base URL and key. Prints `ok NAME {json}` per check:
the JSON is what the Rust test compares with its usage records (each model
call's id, status, usage as the SDK parsed it, `cost` included).

Run by tests/it/responses.rs with GATEWAY_BASE_URL (the gateway's
`/api/v1`), GATEWAY_KEY, GATEWAY_MODEL (`provider/model`), and for the
conversation's third turn GATEWAY_FALLBACK (a model of another provider
kind, tried after GATEWAY_MODEL), GATEWAY_SIM_URL and GATEWAY_FAULT (a
fault posted to the simulator's `/__sim/faults` before that turn, so that
GATEWAY_MODEL fails and the fallback serves it).
"""

import json
import os
import urllib.request

import openai
from openai import OpenAI

client = OpenAI(
    base_url=os.environ["GATEWAY_BASE_URL"],
    api_key=os.environ["GATEWAY_KEY"],
    max_retries=0,
)
MODEL = os.environ["GATEWAY_MODEL"]

WEATHER = {
    "type": "function",
    "name": "get_weather",
    "description": "The weather in a city",
    "parameters": {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
        "additionalProperties": False,
    },
    "strict": True,
}


def seen(r):
    """What the Rust test checks of a response against its usage record."""
    u = r.usage
    extra = u.model_extra or {}
    return {
        "id": r.id,
        "status": r.status,
        "input": u.input_tokens,
        "cached": u.input_tokens_details.cached_tokens,
        "output": u.output_tokens,
        "reasoning": u.output_tokens_details.reasoning_tokens,
        "total": u.total_tokens,
        "cost": None if extra.get("cost") is None else f"{extra['cost']:.8f}",
        "text": r.output_text,
    }


def report(name, r, **more):
    v = seen(r)
    v.update(more)
    print("ok", name, json.dumps(v), flush=True)


# A plain answer, its instructions kept, retrieved and listed.
r = client.responses.create(
    model=MODEL, input="Hello there", instructions="Be brief.", max_output_tokens=16
)
assert r.object == "response" and r.status in ("completed", "incomplete"), r
assert r.output_text, r
assert r.usage.total_tokens == r.usage.input_tokens + r.usage.output_tokens, r.usage
report("create", r)
again = client.responses.retrieve(r.id)
assert again.id == r.id and again.output_text == r.output_text, again
items = client.responses.input_items.list(r.id)
assert [i.type for i in items.data] == ["message"], items
assert items.data[0].content[0].text == "Hello there", items
print("ok retrieve", json.dumps({"id": again.id, "items": len(items.data)}), flush=True)

# Streamed: typed events, the text deltas adding up to the final text.
with client.responses.stream(model=MODEL, input="Tell me a story") as s:
    kinds, deltas = [], []
    for event in s:
        kinds.append(event.type)
        if event.type == "response.output_text.delta":
            deltas.append(event.delta)
    final = s.get_final_response()
assert kinds[0] == "response.created", kinds
assert kinds[-1] in ("response.completed", "response.incomplete"), kinds
assert "".join(deltas) == final.output_text, (deltas, final.output_text)
report("stream", final, deltas=len(deltas))

# A function tool round trip, whole: the call, its output, the answer.
call = client.responses.create(
    model=MODEL, input="What is the weather in Paris?", tools=[WEATHER], tool_choice="required"
)
fc = [o for o in call.output if o.type == "function_call"]
assert fc and fc[0].name == "get_weather", call.output
assert "city" in json.loads(fc[0].arguments), fc[0].arguments
report("tool_call", call)
done = client.responses.create(
    model=MODEL,
    previous_response_id=call.id,
    tools=[WEATHER],
    input=[{"type": "function_call_output", "call_id": fc[0].call_id, "output": "sunny"}],
)
assert done.output_text, done.output
report("tool_answer", done)

# The same round trip streamed.
with client.responses.stream(
    model=MODEL, input="Weather in Rome?", tools=[WEATHER], tool_choice="required"
) as s:
    arg_events = sum(1 for e in s if e.type == "response.function_call_arguments.delta")
    streamed_call = s.get_final_response()
sfc = [o for o in streamed_call.output if o.type == "function_call"]
assert sfc and json.loads(sfc[0].arguments), streamed_call.output
report("tool_call_stream", streamed_call, arg_events=arg_events)
with client.responses.stream(
    model=MODEL,
    previous_response_id=streamed_call.id,
    tools=[WEATHER],
    input=[{"type": "function_call_output", "call_id": sfc[0].call_id, "output": "rainy"}],
) as s:
    for _ in s:
        pass
    streamed_done = s.get_final_response()
assert streamed_done.output_text, streamed_done.output
report("tool_answer_stream", streamed_done)

# Structured output: a JSON schema honoured.
person = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
    "required": ["name", "age"],
    "additionalProperties": False,
}
js = client.responses.create(
    model=MODEL,
    input="Invent a person",
    text={"format": {"type": "json_schema", "name": "person", "schema": person, "strict": True}},
)
obj = json.loads(js.output_text)
assert isinstance(obj["name"], str) and isinstance(obj["age"], int), obj
report("json_schema", js)

# A conversation over three turns; the third served by the fallback after
# the first deployment fails.
t1 = client.responses.create(model=MODEL, input="My name is Ada.", max_output_tokens=12)
report("turn1", t1)
t2 = client.responses.create(
    model=MODEL, previous_response_id=t1.id, input="What is my name?", max_output_tokens=12
)
report("turn2", t2)
fallback = os.environ.get("GATEWAY_FALLBACK")
if fallback:
    req = urllib.request.Request(
        os.environ["GATEWAY_SIM_URL"] + "/__sim/faults",
        data=os.environ["GATEWAY_FAULT"].encode(),
        headers={"content-type": "application/json"},
    )
    urllib.request.urlopen(req).read()
t3 = client.responses.create(
    model=MODEL,
    previous_response_id=t2.id,
    input="And again?",
    max_output_tokens=12,
    extra_body={"models": [MODEL, fallback]} if fallback else None,
)
report("turn3", t3)

# Deleted: gone for retrieve and for a continuation.
client.responses.delete(t3.id)
try:
    client.responses.retrieve(t3.id)
    raise AssertionError("a deleted response was retrieved")
except openai.NotFoundError as e:
    assert e.status_code == 404
print("ok delete", json.dumps({"id": t3.id}), flush=True)
