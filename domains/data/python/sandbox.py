"""The data analyst's sandbox: one DuckDB file per conversation that can reach nothing outside
the conversation's workspace, and the one mapping from the `/workspace/...` paths the model uses
to the real directory.

DuckDB enforces it itself: a connection sets `allowed_directories` to the workspace, turns
`enable_external_access` off and locks the configuration, with extension autoloading and
autoinstalling off. After that `read_csv('/etc/passwd')`, `ATTACH` of a file elsewhere,
`INSTALL`/`LOAD` from disk, `COPY ... TO` outside and changing any setting are refused by DuckDB.
DuckDB checks the path it is given, not where a symbolic link in the workspace leads, and it
refuses relative paths; so `/workspace/...` literals in SQL are rewritten to the real directory
(`workspace_sql`) and a workspace with a link leading out is refused (`check_links`).
"""

import os

import duckdb

# The database every conversation's tools work on, in its workspace.
DATABASE_FILE = "analyst.duckdb"
# How the model names the workspace (the engine's file tools use the same prefix).
WORKSPACE_PREFIX = "/workspace"
# Entries of the workspace the link check looks at before refusing to go on (bounds each call).
WORKSPACE_ENTRIES_MAX = 20_000
# DuckDB's own bounds for one connection: CI machines have two cores.
THREADS = 2
MEMORY_LIMIT = "1GB"


class Refused(Exception):
    """A request that would reach outside the workspace, or that names no workspace path."""


def workspace_root(path=None):
    """The real, absolute workspace directory (links resolved)."""
    return os.path.realpath(path or os.getcwd())


def database_path(ws):
    return os.path.join(ws, DATABASE_FILE)


def sql_string(text):
    """`text` as a SQL string literal."""
    return "'" + text.replace("'", "''") + "'"


def connect(ws, database=None, extra_dirs=()):
    """A connection to the conversation's database (or `database`) that reaches nothing outside
    `ws` (and `extra_dirs`, which only the server's own loading of its sources uses)."""
    con = duckdb.connect(
        database or database_path(ws),
        config={
            "autoinstall_known_extensions": False,
            "autoload_known_extensions": False,
            "threads": THREADS,
            "memory_limit": MEMORY_LIMIT,
        },
    )
    try:
        # In this order: `allowed_directories` cannot change once external access is off, and
        # nothing can once the configuration is locked.
        dirs = ", ".join(sql_string(d.rstrip("/") + "/") for d in [ws, *extra_dirs])
        con.execute(f"SET allowed_directories = [{dirs}]")
        con.execute("SET enable_external_access = false")
        con.execute("SET lock_configuration = true")
    except Exception:
        con.close()
        raise
    return con


def real_path(ws, path):
    """The real path of a `/workspace/...` path (or one relative to the workspace), refused when
    it leads outside `ws`, through `..` or a link."""
    if not isinstance(path, str) or not path.strip():
        raise Refused("a path is required, like /workspace/data/file.csv")
    path = path.strip()
    if path == WORKSPACE_PREFIX or path.startswith(WORKSPACE_PREFIX + "/"):
        rel = path[len(WORKSPACE_PREFIX) :].lstrip("/")
    elif os.path.isabs(path):
        raise Refused(f"{path} is outside the workspace: paths start with /workspace/")
    else:
        rel = path
    real = os.path.realpath(os.path.join(ws, rel))
    if real != ws and not real.startswith(ws.rstrip("/") + "/"):
        raise Refused(f"{path} leads outside the workspace")
    return real


def shown_path(ws, real):
    """How the model sees a real path inside the workspace: `/workspace/...`."""
    if real == ws:
        return WORKSPACE_PREFIX
    return WORKSPACE_PREFIX + "/" + os.path.relpath(real, ws)


def hide_root(ws, text):
    """`text` with the workspace's real directory written as `/workspace` (error messages)."""
    return text.replace(ws.rstrip("/"), WORKSPACE_PREFIX)


def check_links(ws):
    """Refuses a workspace holding a symbolic link that leads outside it: DuckDB would follow
    it. Nothing the analyst can call makes links; this covers a person's own."""
    seen = 0
    for top, dirs, files in os.walk(ws, followlinks=False):
        for name in dirs + files:
            seen += 1
            if seen > WORKSPACE_ENTRIES_MAX:
                raise Refused(
                    f"the workspace has more than {WORKSPACE_ENTRIES_MAX} entries; "
                    "remove some before running SQL"
                )
            full = os.path.join(top, name)
            if os.path.islink(full):
                target = os.path.realpath(full)
                if target != ws and not target.startswith(ws.rstrip("/") + "/"):
                    raise Refused(
                        f"{shown_path(ws, full)} is a link leading outside the workspace; "
                        "remove it before running SQL"
                    )


def workspace_sql(ws, sql):
    """`sql` with every string literal that starts with `/workspace/` (or is `/workspace`)
    rewritten to the real directory; identifiers, comments and other literals are left as
    they are. DuckDB then checks the real path against `allowed_directories`."""
    out = []
    i, n = 0, len(sql)
    root = ws.rstrip("/")
    while i < n:
        c = sql[i]
        if c == "'":
            j = i + 1
            while j < n:
                if sql[j] == "'":
                    if j + 1 < n and sql[j + 1] == "'":
                        j += 2
                        continue
                    break
                j += 1
            body = sql[i + 1 : j]
            if body == WORKSPACE_PREFIX or body.startswith(WORKSPACE_PREFIX + "/"):
                body = root.replace("'", "''") + body[len(WORKSPACE_PREFIX) :]
            out.append("'" + body + "'")
            i = j + 1
        elif c == '"':
            j = sql.find('"', i + 1)
            j = n if j < 0 else j
            out.append(sql[i : j + 1])
            i = j + 1
        elif sql.startswith("--", i):
            j = sql.find("\n", i)
            j = n if j < 0 else j
            out.append(sql[i:j])
            i = j
        elif sql.startswith("/*", i):
            j = sql.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(sql[i:j])
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)
