"""Drives the gateway's Gemini door (/api/v1/gemini) with Google's official
Python SDK (`google-genai`, the version pinned in scripts/setup-tools.sh),
unchanged but for its base URL and key: a generated answer, a streamed one,
a token count, one embedding and a batch of them. Prints `ok NAME {json}`
per check, the JSON what the Rust test compares with its usage records.

Run by tests/it/gemini_door.rs with GATEWAY_BASE_URL (the gateway's
`/api/v1/gemini`: the SDK adds `/v1beta/models/...`), GATEWAY_KEY (a gateway
API key), GATEWAY_MODEL (a chat model, `provider/model`) and
GATEWAY_EMBED_MODEL (an embedding model).
"""

import json
import os

from google import genai
from google.genai import types

client = genai.Client(
    api_key=os.environ["GATEWAY_KEY"],
    http_options=types.HttpOptions(
        base_url=os.environ["GATEWAY_BASE_URL"],
        retry_options=types.HttpRetryOptions(attempts=1),
    ),
)
MODEL = os.environ["GATEWAY_MODEL"]
EMBED = os.environ["GATEWAY_EMBED_MODEL"]


def usage(u):
    return {
        "prompt": u.prompt_token_count,
        "candidates": u.candidates_token_count,
        "total": u.total_token_count,
    }


r = client.models.generate_content(
    model=MODEL,
    contents="Hello there",
    config=types.GenerateContentConfig(
        system_instruction="Be brief.", max_output_tokens=5
    ),
)
assert len(r.text.split()) == 5, r
assert r.candidates[0].finish_reason == types.FinishReason.MAX_TOKENS, r
u = usage(r.usage_metadata)
assert u["candidates"] == 5 and u["prompt"] > 0, u
assert u["total"] == u["prompt"] + u["candidates"], u
print("ok generate", json.dumps(u))

text, last = "", None
for chunk in client.models.generate_content_stream(
    model=MODEL,
    contents="Hello there",
    config=types.GenerateContentConfig(max_output_tokens=4),
):
    text += chunk.text or ""
    last = chunk
assert len(text.split()) == 4, text
assert last.candidates[0].finish_reason == types.FinishReason.MAX_TOKENS, last
u = usage(last.usage_metadata)
assert u["candidates"] == 4 and u["prompt"] > 0, u
print("ok stream", json.dumps(u))

c = client.models.count_tokens(model=MODEL, contents="Hello there")
assert c.total_tokens > 0, c
print("ok count", json.dumps({"total": c.total_tokens}))

e = client.models.embed_content(model=EMBED, contents="The quick brown fox")
assert len(e.embeddings) == 1 and len(e.embeddings[0].values) > 0, e
print("ok embed", json.dumps({"n": 1, "dims": len(e.embeddings[0].values)}))

# One content per text (a list of strings is one content of three parts).
e = client.models.embed_content(
    model=EMBED,
    contents=[types.Content(parts=[types.Part(text=t)]) for t in ["one", "two", "three"]],
)
assert len(e.embeddings) == 3, e
assert all(len(x.values) > 0 for x in e.embeddings), e
print("ok batch", json.dumps({"n": 3}))
