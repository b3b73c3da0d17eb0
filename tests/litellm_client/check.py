"""litellm's client (pinned in scripts/setup-tools.sh) driving the
gateway's /api/v1/chat/completions as an OpenAI-compatible upstream
(`openai/<model>`, the gateway's base URL and key): a chat completion
with no warning or log line about `cost`, and the cost litellm reports
the one the gateway said (`usage.cost`). Prints one JSON line (what
litellm reported, the request id), then `ok`, for tests/it/clients.rs
to check against the usage records."""

import json
import logging
import os
import sys
import warnings

# The price map shipped in the package: nothing is fetched.
os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"

BASE = os.environ["GATEWAY_BASE_URL"]
KEY = os.environ["GATEWAY_KEY"]
MODEL = os.environ["GATEWAY_MODEL"]


class Capture(logging.Handler):
    """Every warning or error logged, whichever logger wrote it."""

    def __init__(self):
        super().__init__(level=logging.WARNING)
        self.lines = []

    def emit(self, record):
        self.lines.append(f"{record.name} {record.levelname}: {record.getMessage()}")


def request_id(hidden):
    headers = hidden.get("additional_headers") or {}
    for k, v in headers.items():
        if k.lower().endswith("x-request-id"):
            return v
    raise SystemExit(f"no x-request-id among {sorted(headers)}")


def main():
    capture = Capture()
    logging.getLogger().addHandler(capture)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        import litellm

        litellm.telemetry = False
        for name in ("LiteLLM", "LiteLLM Router", "LiteLLM Proxy"):
            logging.getLogger(name).addHandler(capture)
            logging.getLogger(name).setLevel(logging.WARNING)
        messages = [{"role": "user", "content": "Hello there"}]
        r = litellm.completion(
            model=f"openai/{MODEL}", api_base=BASE, api_key=KEY, messages=messages, max_tokens=5
        )
        # What an application does with an answer: reads and serializes it.
        dumped = json.loads(r.model_dump_json())
        cost = litellm.completion_cost(completion_response=r)
        print(
            json.dumps(
                {
                    "what": "completion",
                    "request_id": request_id(r._hidden_params),
                    "prompt_tokens": r.usage.prompt_tokens,
                    "completion_tokens": r.usage.completion_tokens,
                    "usage_cost": f"{dumped['usage']['cost']:.8f}",
                    "response_cost": f"{r._hidden_params['response_cost']:.8f}",
                    "completion_cost": f"{cost:.8f}",
                }
            )
        )
    mentions = [str(w.message) for w in caught if "cost" in str(w.message).lower()]
    mentions += [line for line in capture.lines if "cost" in line.lower()]
    if mentions:
        print("warnings about cost:\n" + "\n".join(mentions), file=sys.stderr)
        sys.exit(1)
    print("ok")


main()
