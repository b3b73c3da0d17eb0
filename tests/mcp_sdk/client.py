"""Drives the gateway's MCP door (/api/v1/mcp/{server}) with the official
`mcp` Python SDK's Streamable HTTP client, unchanged but for its URL and
the gateway key in `Authorization`: initialize, list (filtered by the key's
allow-list), call a free tool, a priced one, one outside the allow-list,
a slow one reporting progress; then the same through the virtual server
(`/api/v1/mcp`, tools named `{server}__{tool}`). Prints `ok NAME {json}`
per check.

Run by tests/it/mcp.rs with GATEWAY_MCP_URL (the gateway's `/api/v1/mcp`),
GATEWAY_KEY and MCP_STEP (which checks to run: `all`, `docs` or `nocredit`).
"""

import asyncio
import json
import os

from mcp import ClientSession
from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client

base = os.environ["GATEWAY_MCP_URL"]
key = os.environ["GATEWAY_KEY"]
step = os.environ.get("MCP_STEP", "all")


def text(result):
    return "".join(getattr(c, "text", "") for c in result.content)


async def session(server, body):
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {key}"})
    url = f"{base}/{server}" if server else base
    async with http:
        async with streamable_http_client(url, http_client=http) as streams:
            async with ClientSession(streams[0], streams[1]) as s:
                await s.initialize()
                await body(s)


async def docs(s):
    tools = sorted(t.name for t in (await s.list_tools()).tools)
    print("ok docs_tools", json.dumps(tools), flush=True)
    r = await s.call_tool("add", {"a": 2, "b": 3})
    print("ok add", json.dumps({"text": text(r), "error": r.is_error}), flush=True)
    seen = []

    async def progress(p, total, message):
        seen.append([p, total])

    r = await s.call_tool("slow", {"steps": 3}, progress_callback=progress)
    print("ok slow", json.dumps({"text": text(r), "progress": seen}), flush=True)
    r = await s.call_tool("whoami", {})
    print("ok whoami", json.dumps({"text": text(r)}), flush=True)


async def github(s):
    tools = sorted(t.name for t in (await s.list_tools()).tools)
    print("ok github_tools", json.dumps(tools), flush=True)
    r = await s.call_tool("create_issue", {"title": "hello"})
    print("ok create_issue", json.dumps({"text": text(r), "error": r.is_error}), flush=True)
    try:
        await s.call_tool("search", {"q": "x"})
        print("ok search_refused", json.dumps({"refused": False}), flush=True)
    except Exception as e:  # a JSON-RPC error: the SDK raises it
        print("ok search_refused", json.dumps({"refused": True, "message": str(e)}), flush=True)


async def virtual(s):
    tools = sorted(t.name for t in (await s.list_tools()).tools)
    print("ok virtual_tools", json.dumps(tools), flush=True)
    r = await s.call_tool("docs__add", {"a": 20, "b": 22})
    print("ok virtual_add", json.dumps({"text": text(r), "error": r.is_error}), flush=True)
    seen = []

    async def progress(p, total, message):
        seen.append([p, total])

    r = await s.call_tool("docs__slow", {"steps": 2}, progress_callback=progress)
    print("ok virtual_slow", json.dumps({"text": text(r), "progress": seen}), flush=True)
    r = await s.call_tool("github__create_issue", {"title": "through the virtual server"})
    print("ok virtual_issue", json.dumps({"text": text(r), "error": r.is_error}), flush=True)
    try:
        await s.call_tool("github__search", {"q": "x"})
        print("ok virtual_refused", json.dumps({"refused": False}), flush=True)
    except Exception as e:
        print("ok virtual_refused", json.dumps({"refused": True, "message": str(e)}), flush=True)


async def nocredit(s):
    try:
        r = await s.call_tool("create_issue", {"title": "unpaid"})
        print("ok unpaid", json.dumps({"refused": False, "text": text(r)}), flush=True)
    except Exception as e:
        print("ok unpaid", json.dumps({"refused": True, "message": str(e)}), flush=True)


async def main():
    if step == "nocredit":
        await session("github", nocredit)
        return
    if step == "docs":
        await session("docs", docs)
        return
    await session("docs", docs)
    await session("github", github)
    await session(None, virtual)


asyncio.run(main())
