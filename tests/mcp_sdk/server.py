"""An MCP server for tests/it/mcp.rs, built with the official `mcp` Python
SDK (the version pinned in scripts/setup-tools.sh) and served over
Streamable HTTP: `python3 server.py NAME PORT`. `docs` has a free `add`,
a `slow` tool that reports progress, and `whoami` (the credential header
it was sent: the gateway must scrub it); `github` has `create_issue`,
`search` and `delete_repo`. Every tool refuses a call that does not carry
the credential of MCP_TEST_TOKEN in `Authorization`.
"""

import asyncio
import os
import sys

from mcp.server.mcpserver import Context, MCPServer

name, port = sys.argv[1], int(sys.argv[2])
token = os.environ["MCP_TEST_TOKEN"]
app = MCPServer(name)


def credential(ctx: Context) -> str:
    got = (ctx.headers or {}).get("authorization", "")
    if got != f"Bearer {token}":
        raise ValueError("unauthorized")
    return got


if name == "docs":
    @app.tool()
    def add(a: int, b: int, ctx: Context) -> int:
        """Adds two numbers."""
        credential(ctx)
        return a + b

    @app.tool()
    async def slow(steps: int, ctx: Context) -> str:
        """Reports progress at each step, then answers."""
        credential(ctx)
        for i in range(steps):
            await ctx.report_progress(i + 1, steps, f"step {i + 1}")
            await asyncio.sleep(0.1)
        return "slow done"

    @app.tool()
    def whoami(ctx: Context) -> str:
        """Echoes the credential it was sent."""
        return credential(ctx)
else:
    @app.tool()
    def create_issue(title: str, ctx: Context) -> str:
        """Opens an issue."""
        credential(ctx)
        print(f"called create_issue {title}", flush=True)
        return f"issue opened: {title}"

    @app.tool()
    def search(q: str, ctx: Context) -> str:
        """Searches."""
        credential(ctx)
        print(f"called search {q}", flush=True)
        return f"found {q}"

    @app.tool()
    def delete_repo(repo: str, ctx: Context) -> str:
        """Deletes a repository."""
        credential(ctx)
        return f"deleted {repo}"

print(f"listening {port}", flush=True)
asyncio.run(app.run_streamable_http_async(host="127.0.0.1", port=port))
