"""A small MCP server for Chronicle's tests, on the official MCP Python SDK (FastMCP).

    server.py stdio                 serve over stdio
    server.py http [PORT]           serve streamable HTTP on 127.0.0.1:PORT (0: any free port) at
                                    /mcp, and print `PORT <n>` once listening
    server.py dup                   over stdio, list two tools with one name (a bad server)

Every call is appended as a JSON line to the file named by MCP_TEST_LOG (when set): the tool,
its arguments, the `chronicle/idempotency_key` of its `_meta` and the server's pid. That is how
the tests count what reached the server. With MCP_TEST_TOKEN set, an HTTP request without
`Authorization: Bearer <token>` is answered 401. MCP_TEST_EXTRA_TOOL adds a do-nothing tool of
that name.
"""

import asyncio
import json
import os
import signal
import socket
import sys
import time
from typing import TypedDict

from mcp.server.fastmcp import Context, FastMCP
import mcp.types as types
from mcp.types import ToolAnnotations

mcp = FastMCP("chronicle-test", log_level="WARNING")


def record(tool, args, ctx):
    path = os.environ.get("MCP_TEST_LOG")
    if not path:
        return
    key = None
    meta = ctx.request_context.meta if ctx is not None else None
    if meta is not None and meta.model_extra:
        key = meta.model_extra.get("chronicle/idempotency_key")
    line = json.dumps({"tool": tool, "args": args, "key": key, "pid": os.getpid()})
    with open(path, "a", encoding="utf-8") as f:
        f.write(line + "\n")


@mcp.tool(description="Echoes the text back.")
def echo(text: str, ctx: Context) -> str:
    record("echo", {"text": text}, ctx)
    return text


@mcp.tool(description="Adds two integers.")
def add(a: int, b: int, ctx: Context) -> int:
    record("add", {"a": a, "b": b}, ctx)
    return a + b


@mcp.tool(description="Does nothing (for measuring a call's overhead).")
def noop() -> str:
    return "ok"


@mcp.tool(description="Sleeps for the given seconds, then answers.")
async def slow(seconds: float, ctx: Context) -> str:
    record("slow", {"seconds": seconds}, ctx)
    await asyncio.sleep(seconds)
    return "done"


@mcp.tool(description="Hangs the whole server (a blocking sleep on its event loop).")
def hang(ctx: Context) -> str:
    record("hang", {}, ctx)
    time.sleep(3600)
    return "unreachable"


@mcp.tool(description="Kills its own server in the middle of the call.")
def die(ctx: Context) -> str:
    record("die", {}, ctx)
    os.kill(os.getpid(), signal.SIGKILL)
    return "unreachable"


@mcp.tool(
    description="Drops a table (destructive).",
    annotations=ToolAnnotations(destructiveHint=True, readOnlyHint=False),
)
def drop_table(table: str, ctx: Context) -> str:
    record("drop_table", {"table": table}, ctx)
    return f"dropped {table}"


@mcp.tool(description="Writes a note into the server's working directory.")
def write_note(name: str, text: str, ctx: Context) -> str:
    record("write_note", {"name": name, "text": text}, ctx)
    with open(name, "w", encoding="utf-8") as f:
        f.write(text)
    return os.path.join(os.getcwd(), name)


class Where(TypedDict):
    cwd: str
    pid: int


@mcp.tool(description="Says where the server runs: its working directory and pid.")
def where(ctx: Context) -> Where:
    record("where", {}, ctx)
    return {"cwd": os.getcwd(), "pid": os.getpid()}


@mcp.tool(description="Answers with a text of n characters.")
def big(n: int, ctx: Context) -> str:
    record("big", {"n": n}, ctx)
    return "x" * n


@mcp.tool(description="Always fails.")
def fail(ctx: Context) -> str:
    record("fail", {}, ctx)
    raise ValueError("the tool failed on purpose")


async def extra(ctx: Context) -> str:
    """A tool added while the server runs."""
    record("extra", {}, ctx)
    return "extra here"


@mcp.tool(description="Adds the tool `extra` and tells the client its tool list changed.")
async def grow(ctx: Context) -> str:
    record("grow", {}, ctx)
    mcp.add_tool(extra, name="extra", description="A tool added while the server runs.")
    # Related to this request: over streamable HTTP it travels in this call's response stream,
    # before the answer (an unrelated one would take the session's own stream, in no set order).
    notification = types.ServerNotification(types.ToolListChangedNotification())
    await ctx.session.send_notification(notification, ctx.request_context.request_id)
    return "grown"


if os.environ.get("MCP_TEST_EXTRA_TOOL"):
    # A tool under a name the test chooses (a built-in tool's, to test clashes).
    mcp.add_tool(noop, name=os.environ["MCP_TEST_EXTRA_TOOL"], description="Does nothing.")


def with_token(app, token):
    async def guarded(scope, receive, send):
        if scope["type"] == "http":
            headers = dict(scope.get("headers") or [])
            if headers.get(b"authorization") != f"Bearer {token}".encode():
                await send({"type": "http.response.start", "status": 401, "headers": []})
                await send({"type": "http.response.body", "body": b"unauthorized"})
                return
        await app(scope, receive, send)

    return guarded


async def serve_http(port):
    import uvicorn

    app = mcp.streamable_http_app()
    token = os.environ.get("MCP_TEST_TOKEN")
    if token:
        app = with_token(app, token)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen(128)
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    server = uvicorn.Server(config)
    print(f"PORT {sock.getsockname()[1]}", flush=True)
    await server.serve(sockets=[sock])


def serve_dup():
    from mcp.server.lowlevel import Server
    from mcp.server.stdio import stdio_server

    server = Server("chronicle-test-dup")
    schema = {"type": "object", "properties": {}}

    @server.list_tools()
    async def list_tools():
        return [
            types.Tool(name="same", description="one", inputSchema=schema),
            types.Tool(name="same", description="two", inputSchema=schema),
        ]

    async def main():
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    asyncio.run(main())


if __name__ == "__main__":
    mode = sys.argv[1] if len(sys.argv) > 1 else "stdio"
    if mode == "stdio":
        mcp.run("stdio")
    elif mode == "http":
        asyncio.run(serve_http(int(sys.argv[2]) if len(sys.argv) > 2 else 0))
    elif mode == "dup":
        serve_dup()
    else:
        sys.exit(f"unknown mode {mode}")
