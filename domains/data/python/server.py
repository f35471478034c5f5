"""The data analyst's tools, served over MCP (stdio) on the official `mcp` Python SDK (FastMCP):
one DuckDB file per conversation in its workspace, and dbt (dbt-core with dbt-duckdb) on a dbt
project inside it. Chronicle starts one process per conversation with the conversation's
workspace as the working directory:

    python domains/data/python/server.py --sources domains/data/sample

Tools: list_tables, describe_table, sample_rows, run_sql, fetch_result, ingest_source,
save_chart_spec, save_report_md, dbt_run, dbt_compile, dbt_ls, dbt_test. Paths are the model's:
`/workspace/...`. Every answer is bounded (rows, cell text, bytes). Each call opens the database
in the sandbox (`sandbox.connect`) and closes it before answering, so nothing holds DuckDB's
file lock between calls — dbt opens the same file from its own process.
"""

import argparse
import datetime
import decimal
import functools
import json
import logging
import math
import os
import re
import shutil
import subprocess
import sys
import threading
import uuid
from typing import Annotated, Any

import duckdb
import yaml
from mcp.server.fastmcp import FastMCP
from mcp.types import ToolAnnotations
from pydantic import Field

import sandbox
from sandbox import Refused, sql_string

# Bounds on every answer, each in its unit.
SQL_CHARS_MAX = 20_000
SQL_SECONDS_MAX = 25
PREVIEW_ROWS_DEFAULT = 10
PREVIEW_ROWS_MAX = 50
SAMPLE_ROWS_MAX = 100
FETCH_ROWS_MAX = 500
CELL_CHARS_MAX = 200
ANSWER_BYTES_MAX = 12_000
TABLES_MAX = 200
CHART_ROWS_MAX = 5_000
CHART_BYTES_MAX = 2_000_000
REPORT_BYTES_MAX = 256_000
DBT_SECONDS_MAX = 110
DBT_RESULTS_MAX = 100
# The end of dbt's output an answer carries: its summary when it succeeded, more when it did not.
DBT_OUTPUT_CHARS_MAX = 4_000
DBT_SUCCESS_OUTPUT_CHARS_MAX = 600
SOURCE_FILES_MAX = 100

# Where run_sql keeps its results, and its record of every run.
RESULTS_SCHEMA = "results"
RUNS_TABLE = "results._runs"
CHARTS_DIR = "charts"
REPORTS_DIR = "reports"
DEFAULT_DBT_PROJECT = "/workspace/dbt"
SOURCE_EXTENSIONS = {".csv": "csv", ".parquet": "parquet", ".json": "json", ".jsonl": "json"}
VEGA_LITE_SCHEMA = "https://vega.github.io/schema/vega-lite/v5.json"
VEGA_LITE_VIEWS = ("mark", "layer", "concat", "hconcat", "vconcat", "facet", "repeat")

IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,62}$")
FILE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")
RUN_ID = re.compile(r"^run_([1-9][0-9]{0,8})$")

log = logging.getLogger("chronicle-data")
mcp = FastMCP(
    "chronicle-data",
    instructions="A DuckDB database per conversation and dbt on the project in /workspace/dbt.",
    log_level="WARNING",
)
# One call at a time: a call holds the database file while it runs, and dbt needs it whole.
LOCK = threading.Lock()
WS = sandbox.workspace_root()

def tool(annotations):
    """A tool whose answer is compact JSON text (FastMCP would indent it): fewer bytes in every
    recorded call and in the model's context."""

    def register(fn):
        @functools.wraps(fn)
        def compact(*args, **kwargs):
            return json.dumps(fn(*args, **kwargs), separators=(",", ":"), ensure_ascii=False)

        mcp.add_tool(compact, annotations=annotations, structured_output=False)
        return fn

    return register


READ_ONLY = ToolAnnotations(readOnlyHint=True, destructiveHint=False, openWorldHint=False)
# Changes only the conversation's own database and files; a person need not approve each query.
WRITES = ToolAnnotations(readOnlyHint=False, destructiveHint=False, openWorldHint=False)
# dbt builds and replaces tables from a project's code: a person approves it.
DBT = ToolAnnotations(readOnlyHint=False, destructiveHint=True, openWorldHint=False)


class ToolFailure(Exception):
    """A call the tool refuses or cannot do: the model reads the message."""


# ---- values --------------------------------------------------------------------------------


def cell(v):
    """A DuckDB value as bounded JSON."""
    if v is None or isinstance(v, (bool, int)):
        return v
    if isinstance(v, (float, decimal.Decimal)):
        f = float(v)
        # Twelve significant digits: a sum's binary noise (0.049999999996) is not the model's.
        return float(f"{f:.12g}") if math.isfinite(f) else str(v)
    if isinstance(v, (datetime.date, datetime.time, datetime.datetime)):
        return v.isoformat()
    if isinstance(v, (list, tuple)):
        return [cell(x) for x in v[:20]]
    if isinstance(v, dict):
        return {str(k): cell(x) for k, x in list(v.items())[:20]}
    if isinstance(v, (bytes, bytearray, memoryview)):
        return f"<{len(bytes(v))} bytes>"
    text = str(v) if not isinstance(v, str) else v
    return text if len(text) <= CELL_CHARS_MAX else text[:CELL_CHARS_MAX] + "…"


def rows_of(cur, limit):
    columns = [d[0] for d in cur.description or []]
    rows = [[cell(v) for v in r] for r in cur.fetchmany(limit)]
    return columns, rows


def bounded(answer, rows_key="rows"):
    """`answer` with rows dropped from its end until it fits in ANSWER_BYTES_MAX."""
    rows = answer.get(rows_key)
    while rows and len(json.dumps(answer, default=str)) > ANSWER_BYTES_MAX:
        del rows[max(1, len(rows) * 3 // 4) :]
        answer["truncated"] = True
        if len(rows) == 1 and len(json.dumps(answer, default=str)) > ANSWER_BYTES_MAX:
            rows.clear()
    return answer


def column_types(cur):
    return [{"name": d[0], "type": str(d[1])} for d in cur.description or []]


# ---- the database --------------------------------------------------------------------------


class Db:
    """One call's connection, closed when the call ends; errors name `/workspace`, not the real
    directory."""

    def __enter__(self):
        LOCK.acquire()
        try:
            self.con = sandbox.connect(WS)
        except Exception:
            LOCK.release()
            raise
        return self.con

    def __exit__(self, *exc):
        try:
            self.con.close()
        finally:
            LOCK.release()


def call(fn):
    """Runs a tool's body, turning refusals and DuckDB's errors into the message the model reads
    (FastMCP answers it as the call's error)."""
    try:
        return fn()
    except Refused as e:
        raise ToolFailure(str(e)) from None
    except duckdb.Error as e:
        raise ToolFailure(sandbox.hide_root(WS, f"{type(e).__name__}: {e}")) from None


def ensure_runs(con):
    con.execute(f"CREATE SCHEMA IF NOT EXISTS {RESULTS_SCHEMA}")
    con.execute(
        f"CREATE TABLE IF NOT EXISTS {RUNS_TABLE} (run_id VARCHAR PRIMARY KEY, n INTEGER, "
        "sql VARCHAR, status VARCHAR, error VARCHAR, result_table VARCHAR, row_count BIGINT)"
    )


def tables(con):
    """Every table and view the model may use: (schema, name, kind)."""
    cur = con.execute(
        "SELECT * FROM (SELECT schema_name s, table_name t, 'table' k FROM duckdb_tables() "
        "WHERE database_name = current_database() AND NOT internal "
        "UNION ALL SELECT schema_name, view_name, 'view' FROM duckdb_views() "
        "WHERE database_name = current_database() AND NOT internal AND NOT temporary) "
        "ORDER BY s <> 'main', s, t"
    )
    return [r for r in cur.fetchall() if f"{r[0]}.{r[1]}" != RUNS_TABLE]


def resolve(con, table):
    """`table` (`name` or `schema.name`) as a quoted identifier of a table that exists."""
    if not isinstance(table, str) or not table.strip():
        raise ToolFailure("`table` is required")
    parts = [p.strip().strip('"') for p in table.strip().split(".")]
    if len(parts) > 2 or not all(parts):
        raise ToolFailure(f"`table` {table!r} is not a table name (name or schema.name)")
    schema, name = parts if len(parts) == 2 else ("main", parts[0])
    known = tables(con)
    for s, t, _ in known:
        if s.lower() == schema.lower() and t.lower() == name.lower():
            return f'"{s}"."{t}"', (t if s == "main" else f"{s}.{t}")
    names = ", ".join(t if s == "main" else f"{s}.{t}" for s, t, _ in known[:30])
    raise ToolFailure(f"unknown table {table!r}; tables: {names or 'none'}")


def count(con, quoted):
    return con.execute(f"SELECT count(*) FROM {quoted}").fetchone()[0]


# ---- schema and metadata -------------------------------------------------------------------


@tool(READ_ONLY)
def list_tables() -> dict[str, Any]:
    """The tables and views of this conversation's DuckDB database, with their row and column
    counts. Query results that run_sql kept are in schema `results` (results.run_1, ...)."""

    def body():
        with Db() as con:
            out = []
            for s, t, kind in tables(con)[:TABLES_MAX]:
                quoted = f'"{s}"."{t}"'
                cols = con.execute(f"SELECT * FROM {quoted} LIMIT 0").description
                out.append(
                    {
                        "table": t if s == "main" else f"{s}.{t}",
                        "kind": kind,
                        "rows": count(con, quoted),
                        "columns": len(cols or []),
                    }
                )
            return {"tables": out}

    return call(body)


@tool(READ_ONLY)
def describe_table(table: Annotated[str, Field(description="name or schema.name")]) -> dict[str, Any]:
    """The columns of a table (name, type, whether it may be null) and its row count."""

    def body():
        with Db() as con:
            quoted, shown = resolve(con, table)
            cols = con.execute(f"DESCRIBE {quoted}").fetchall()
            return {
                "table": shown,
                "rows": count(con, quoted),
                "columns": [
                    {"name": c[0], "type": c[1], "nullable": c[2] == "YES"} for c in cols
                ],
            }

    return call(body)


@tool(READ_ONLY)
def sample_rows(
    table: Annotated[str, Field(description="name or schema.name")],
    limit: Annotated[int, Field(ge=1, le=SAMPLE_ROWS_MAX)] = 5,
) -> dict[str, Any]:
    """The first `limit` rows of a table, in its stored order."""

    def body():
        with Db() as con:
            quoted, shown = resolve(con, table)
            cur = con.execute(f"SELECT * FROM {quoted} LIMIT {int(limit)}")
            columns, rows = rows_of(cur, limit)
            return bounded({"table": shown, "columns": columns, "rows": rows})

    return call(body)


# ---- queries -------------------------------------------------------------------------------


def next_run(con):
    ensure_runs(con)
    logged = con.execute(f"SELECT coalesce(max(n), 0) FROM {RUNS_TABLE}").fetchone()[0]
    kept = [
        int(m.group(1))
        for (name,) in con.execute(
            "SELECT table_name FROM duckdb_tables() WHERE schema_name = ?", [RESULTS_SCHEMA]
        ).fetchall()
        if (m := RUN_ID.match(name))
    ]
    return max([logged, *kept]) + 1


class Interrupt:
    """Interrupts the connection's query after SQL_SECONDS_MAX."""

    def __init__(self, con):
        self.timer = threading.Timer(SQL_SECONDS_MAX, con.interrupt)

    def __enter__(self):
        self.timer.start()

    def __exit__(self, *exc):
        self.timer.cancel()


def execute_one(con, statement, result_table):
    """Runs one statement; a query's rows are kept as `result_table`. Returns (kept, cursor)."""
    if statement.type == duckdb.StatementType.SELECT:
        try:
            con.execute(f"CREATE TABLE {result_table} AS {statement.query}")
            return True, con.execute(f"SELECT * FROM {result_table}")
        except duckdb.ParserException:
            pass  # not a query `CREATE TABLE AS` takes (a PRAGMA-like SELECT): run it as it is
    return False, con.execute(statement.query)


@tool(WRITES)
def run_sql(
    sql: Annotated[str, Field(description="one DuckDB SQL statement; files as '/workspace/...'")],
    preview_rows: Annotated[int, Field(ge=0, le=PREVIEW_ROWS_MAX)] = PREVIEW_ROWS_DEFAULT,
) -> dict[str, Any]:
    """Runs one SQL statement on this conversation's DuckDB database. A query's result is kept
    as a table named in the answer (`result_table`, results.run_N) that later SQL can use and
    fetch_result pages through; the answer carries a bounded preview. Files are read and
    written as '/workspace/...' paths, only inside the workspace."""

    def body():
        if len(sql) > SQL_CHARS_MAX:
            raise ToolFailure(f"`sql` has {len(sql)} characters; at most {SQL_CHARS_MAX}")
        sandbox.check_links(WS)
        text = sandbox.workspace_sql(WS, sql)
        with Db() as con:
            n = next_run(con)
            run_id = f"run_{n}"
            answer = {"run_id": run_id, "result_table": None, "status": "ok", "error": None}
            kept, row_count, preview = False, None, None
            try:
                statements = con.extract_statements(text)
                if len(statements) != 1:
                    raise ToolFailure(
                        f"run_sql runs one statement at a time; got {len(statements)}"
                    )
                table = f"{RESULTS_SCHEMA}.{run_id}"
                with Interrupt(con):
                    kept, cur = execute_one(con, statements[0], table)
                    if cur.description:
                        columns, rows = rows_of(cur, preview_rows)
                        preview = {"columns": columns, "rows": rows}
                    if kept:
                        row_count = count(con, table)
                        answer["result_table"] = table
                        answer["row_count"] = row_count
            except duckdb.InterruptException:
                answer["status"] = "error"
                answer["error"] = f"the statement ran over {SQL_SECONDS_MAX} s and was stopped"
            except (duckdb.Error, ToolFailure) as e:
                kind = "" if isinstance(e, ToolFailure) else f"{type(e).__name__}: "
                answer["status"] = "error"
                answer["error"] = sandbox.hide_root(WS, f"{kind}{e}")
            answer["preview"] = preview
            con.execute(
                f"INSERT INTO {RUNS_TABLE} VALUES (?, ?, ?, ?, ?, ?, ?)",
                [run_id, n, sql, answer["status"], answer["error"], answer["result_table"], row_count],
            )
            if preview:
                bounded(preview)
                if preview.get("truncated"):
                    answer["preview_truncated"] = True
                    del preview["truncated"]
            return answer

    return call(body)


@tool(READ_ONLY)
def fetch_result(
    run_id: Annotated[str, Field(description="a run_sql answer's run_id, like run_3")],
    limit: Annotated[int, Field(ge=1, le=FETCH_ROWS_MAX)] = 50,
    offset: Annotated[int, Field(ge=0)] = 0,
) -> dict[str, Any]:
    """Rows of a result run_sql kept, from `offset`, at most `limit` (answers stay under about
    12 KB: fewer rows come back when they are wide)."""

    def body():
        if not RUN_ID.match(run_id or ""):
            raise ToolFailure(f"`run_id` {run_id!r} is not a run id like run_3")
        with Db() as con:
            ensure_runs(con)
            logged = con.execute(
                f"SELECT status, error, result_table FROM {RUNS_TABLE} WHERE run_id = ?", [run_id]
            ).fetchone()
            if logged is None:
                raise ToolFailure(f"no run {run_id} in this conversation")
            status, error, table = logged
            if status != "ok":
                raise ToolFailure(f"{run_id} failed: {error}")
            if table is None:
                raise ToolFailure(f"{run_id} was not a query: it kept no rows")
            quoted, _ = resolve(con, table)
            total = count(con, quoted)
            cur = con.execute(f"SELECT * FROM {quoted} LIMIT {int(limit)} OFFSET {int(offset)}")
            columns, rows = rows_of(cur, limit)
            answer = {
                "run_id": run_id,
                "result_table": table,
                "row_count": total,
                "offset": offset,
                "columns": columns,
                "rows": rows,
            }
            return bounded(answer)

    return call(body)


# ---- ingest --------------------------------------------------------------------------------

INGEST_OPTIONS = {
    "csv": {"path", "header", "delimiter"},
    "parquet": {"path"},
    "json": {"path", "format"},
}
JSON_FORMATS = ("auto", "newline_delimited", "array")


def reader(connector, real, config):
    """The DuckDB table function reading `real` the way `config` says."""
    path = sql_string(real)
    if connector == "csv":
        args = [path]
        if "header" in config:
            if not isinstance(config["header"], bool):
                raise ToolFailure("`config.header` must be true or false")
            args.append(f"header = {str(config['header']).lower()}")
        if "delimiter" in config:
            d = config["delimiter"]
            if not isinstance(d, str) or not 1 <= len(d) <= 4:
                raise ToolFailure("`config.delimiter` must be 1 to 4 characters")
            args.append(f"delim = {sql_string(d)}")
        return f"read_csv({', '.join(args)})"
    if connector == "parquet":
        return f"read_parquet({path})"
    fmt = config.get("format", "auto")
    if fmt not in JSON_FORMATS:
        raise ToolFailure(f"`config.format` {fmt!r} is not one of {', '.join(JSON_FORMATS)}")
    return f"read_json({path}, format = {sql_string(fmt)})"


@tool(WRITES)
def ingest_source(
    connector: Annotated[str, Field(description="csv, parquet or json")],
    config: Annotated[
        dict[str, Any],
        Field(description="{path: '/workspace/...'} and for csv header, delimiter; for json format"),
    ],
    target_table: Annotated[str, Field(description="the table to load into (schema main)")],
    overwrite: bool = False,
) -> dict[str, Any]:
    """Loads a CSV, Parquet or JSON file from the workspace into a table of this conversation's
    database. A table that exists is replaced only with overwrite: true."""

    def body():
        if connector not in INGEST_OPTIONS:
            raise ToolFailure(f"`connector` {connector!r} is not one of csv, parquet, json")
        unknown = sorted(set(config) - INGEST_OPTIONS[connector])
        if unknown:
            allowed = ", ".join(sorted(INGEST_OPTIONS[connector]))
            raise ToolFailure(f"`config` keys {unknown} unknown for {connector}; allowed: {allowed}")
        if not IDENT.match(target_table or ""):
            raise ToolFailure(f"`target_table` {target_table!r} must be a plain name (a-z, 0-9, _)")
        real = sandbox.real_path(WS, config.get("path"))
        if any(ch in real for ch in "*?[{"):
            raise ToolFailure("`config.path` names one file: no wildcards")
        if not os.path.isfile(real):
            raise ToolFailure(f"{sandbox.shown_path(WS, real)} is not a file in the workspace")
        source = reader(connector, real, config)
        sandbox.check_links(WS)
        with Db() as con:
            exists = any(s == "main" and t.lower() == target_table.lower() for s, t, _ in tables(con))
            if exists and not overwrite:
                raise ToolFailure(
                    f"table {target_table!r} exists; pass overwrite: true to replace it"
                )
            quoted = f'main."{target_table}"'
            con.execute(f"CREATE OR REPLACE TABLE {quoted} AS SELECT * FROM {source}")
            cur = con.execute(f"SELECT * FROM {quoted} LIMIT 0")
            return {
                "table": target_table,
                "rows": count(con, quoted),
                "columns": column_types(cur),
                "source": sandbox.shown_path(WS, real),
                "replaced": exists,
            }

    return call(body)


# ---- charts and reports --------------------------------------------------------------------


def save_file(folder, name, suffix, data):
    """Writes `data` to /workspace/<folder>/<name><suffix> (never through a link) and answers
    its path and a file link."""
    if not FILE_NAME.match(name or ""):
        raise ToolFailure(f"`name` {name!r} must be 1-64 of a-z, A-Z, 0-9, _ and -")
    real = sandbox.real_path(WS, f"/workspace/{folder}/{name}{suffix}")
    os.makedirs(os.path.dirname(real), exist_ok=True)
    # The folder was checked above; O_NOFOLLOW refuses a link put in its place since.
    fd = os.open(real, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    return {"path": sandbox.shown_path(WS, real), "link": "file://" + real, "bytes": len(data)}


@tool(WRITES)
def save_chart_spec(
    name: Annotated[str, Field(description="file name without extension")],
    spec: Annotated[dict[str, Any], Field(description="a Vega-Lite spec (mark, encoding, ...)")],
    run_id: Annotated[
        str | None, Field(description="a run_sql result whose rows become the chart's data")
    ] = None,
    title: str | None = None,
) -> dict[str, Any]:
    """Saves a Vega-Lite chart spec as /workspace/charts/<name>.vl.json and answers its path and
    link. With run_id, that result's rows (at most 5000) are the chart's data.values."""

    def body():
        if not any(k in spec for k in VEGA_LITE_VIEWS):
            raise ToolFailure(f"`spec` is not a Vega-Lite view: it needs one of {', '.join(VEGA_LITE_VIEWS)}")
        chart = {"$schema": VEGA_LITE_SCHEMA, **spec}
        if title:
            chart["title"] = title
        rows = None
        if run_id is not None:
            if not RUN_ID.match(run_id):
                raise ToolFailure(f"`run_id` {run_id!r} is not a run id like run_3")
            with Db() as con:
                ensure_runs(con)
                found = con.execute(
                    f"SELECT result_table FROM {RUNS_TABLE} WHERE run_id = ? AND status = 'ok'",
                    [run_id],
                ).fetchone()
                if not found or not found[0]:
                    raise ToolFailure(f"no kept result {run_id} in this conversation")
                quoted, _ = resolve(con, found[0])
                cur = con.execute(f"SELECT * FROM {quoted} LIMIT {CHART_ROWS_MAX}")
                columns = [d[0] for d in cur.description]
                values = [dict(zip(columns, (cell(v) for v in r))) for r in cur.fetchall()]
            chart["data"] = {"values": values}
            rows = len(values)
        elif "data" not in chart:
            raise ToolFailure("the chart has no data: give `run_id` or the spec's `data`")
        data = json.dumps(chart, indent=2, default=str).encode()
        if len(data) > CHART_BYTES_MAX:
            raise ToolFailure(f"the chart spec is {len(data)} bytes; at most {CHART_BYTES_MAX}")
        saved = save_file(CHARTS_DIR, name, ".vl.json", data)
        if rows is not None:
            saved["rows"] = rows
        return saved

    return call(body)


@tool(WRITES)
def save_report_md(
    name: Annotated[str, Field(description="file name without extension")],
    content: Annotated[str, Field(description="the report, in Markdown")],
) -> dict[str, Any]:
    """Saves a Markdown report as /workspace/reports/<name>.md (replacing one of that name) and
    answers its path and link."""

    def body():
        data = content.encode()
        if len(data) > REPORT_BYTES_MAX:
            raise ToolFailure(f"the report is {len(data)} bytes; at most {REPORT_BYTES_MAX}")
        return save_file(REPORTS_DIR, name, ".md", data)

    return call(body)


# ---- dbt -----------------------------------------------------------------------------------


def dbt_project(project_dir):
    """The dbt project's real directory (inside the workspace) and its profile name."""
    real = sandbox.real_path(WS, project_dir)
    config = os.path.join(real, "dbt_project.yml")
    if not os.path.isfile(config):
        raise ToolFailure(f"{sandbox.shown_path(WS, real)} has no dbt_project.yml")
    with open(config) as f:
        project = yaml.safe_load(f) or {}
    profile = project.get("profile")
    if not isinstance(profile, str) or not IDENT.match(profile):
        raise ToolFailure("dbt_project.yml names no `profile` (a plain name)")
    return real, profile


def dbt_profiles(profile):
    """Writes the profile dbt runs with into /workspace/.dbt/: DuckDB on this conversation's
    database, in the sandbox (chronicle_dbt_sandbox)."""
    folder = os.path.join(WS, ".dbt")
    os.makedirs(folder, exist_ok=True)
    profiles = {
        profile: {
            "target": "analyst",
            "outputs": {
                "analyst": {
                    "type": "duckdb",
                    "path": sandbox.database_path(WS),
                    "threads": 1,
                    "plugins": [{"module": "chronicle_dbt_sandbox", "config": {"workspace": WS}}],
                }
            },
        }
    }
    with open(os.path.join(folder, "profiles.yml"), "w") as f:
        yaml.safe_dump(profiles, f)
    return folder


def dbt_executable():
    here = os.path.join(os.path.dirname(sys.executable), "dbt")
    return [here] if os.path.exists(here) else [sys.executable, "-m", "dbt.cli.main"]


def dbt_results(project):
    path = os.path.join(project, "target", "run_results.json")
    try:
        with open(path) as f:
            results = json.load(f).get("results", [])
    except (OSError, ValueError):
        return []
    return [
        {
            "unique_id": r.get("unique_id"),
            "status": r.get("status"),
            "message": cell(r.get("message")),
            "seconds": round(r.get("execution_time") or 0, 3),
        }
        for r in results[:DBT_RESULTS_MAX]
    ]


def dbt(command, project_dir, select, extra=()):
    """Runs `dbt <command>` on the project, offline, with the conversation's database closed."""
    if select is not None and (not select.strip() or select.lstrip().startswith("-")):
        raise ToolFailure(f"`select` {select!r} is not a dbt selection")
    project, profile = dbt_project(project_dir)
    sandbox.check_links(WS)
    args = [*dbt_executable(), command, "--project-dir", project]
    if select is not None:
        args += ["--select", select]
    args += list(extra)
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": os.path.join(WS, ".dbt"),
        "PYTHONPATH": os.path.dirname(os.path.abspath(__file__)),
        "PYTHONDONTWRITEBYTECODE": "1",
        "DBT_PROFILES_DIR": dbt_profiles(profile),
        "DBT_SEND_ANONYMOUS_USAGE_STATS": "false",
        "DBT_VERSION_CHECK": "false",
        "DBT_USE_COLORS": "false",
        "DBT_PRINTER_WIDTH": "100",
        "DBT_LOG_PATH": os.path.join(project, "logs"),
        "DBT_TARGET_PATH": os.path.join(project, "target"),
    }
    with LOCK:  # no connection of this process is open while dbt holds the file
        try:
            done = subprocess.run(
                args, cwd=WS, env=env, capture_output=True, text=True, timeout=DBT_SECONDS_MAX
            )
        except subprocess.TimeoutExpired:
            raise ToolFailure(f"dbt {command} took over {DBT_SECONDS_MAX} s and was stopped") from None
    output = sandbox.hide_root(WS, (done.stdout + done.stderr).strip())
    keep = DBT_SUCCESS_OUTPUT_CHARS_MAX if done.returncode == 0 else DBT_OUTPUT_CHARS_MAX
    return {
        "command": f"dbt {command}",
        "status": "success" if done.returncode == 0 else "error",
        "returncode": done.returncode,
        "project": sandbox.shown_path(WS, project),
        "output": output[-keep:],
    }, project


@tool(DBT)
def dbt_run(
    select: Annotated[str | None, Field(description="dbt selection, e.g. a model name")] = None,
    project_dir: str = DEFAULT_DBT_PROJECT,
) -> dict[str, Any]:
    """Runs the dbt project's models (dbt run) into this conversation's database."""

    def body():
        answer, project = dbt("run", project_dir, select)
        answer["results"] = dbt_results(project)
        return answer

    return call(body)


@tool(DBT)
def dbt_compile(
    select: Annotated[str | None, Field(description="dbt selection, e.g. a model name")] = None,
    project_dir: str = DEFAULT_DBT_PROJECT,
) -> dict[str, Any]:
    """Compiles the dbt project (dbt compile): the SQL lands under the project's target/compiled."""

    def body():
        answer, project = dbt("compile", project_dir, select)
        answer["results"] = dbt_results(project)
        return answer

    return call(body)


@tool(DBT)
def dbt_ls(
    select: Annotated[str | None, Field(description="dbt selection, e.g. a model name")] = None,
    project_dir: str = DEFAULT_DBT_PROJECT,
) -> dict[str, Any]:
    """Lists the dbt project's resources (dbt ls)."""

    def body():
        answer, _ = dbt("ls", project_dir, select, ["--quiet", "--output", "name"])
        if answer["status"] == "success":
            answer["resources"] = answer.pop("output").split()[:DBT_RESULTS_MAX]
        return answer

    return call(body)


@tool(DBT)
def dbt_test(
    select: Annotated[str | None, Field(description="dbt selection, e.g. a model name")] = None,
    project_dir: str = DEFAULT_DBT_PROJECT,
) -> dict[str, Any]:
    """Runs the dbt project's tests (dbt test) against this conversation's database."""

    def body():
        answer, project = dbt("test", project_dir, select)
        answer["results"] = dbt_results(project)
        return answer

    return call(body)


# ---- start ---------------------------------------------------------------------------------


def table_name(file_name):
    stem = os.path.splitext(file_name)[0].lower()
    name = re.sub(r"[^a-z0-9_]", "_", stem)
    return name if IDENT.match(name) else f"t_{name}"[:63]


def initialise(sources):
    """A new conversation's database: the tables of the `sources` folder (one per CSV, Parquet or
    JSON file, named by the file), built aside and renamed into place, so a crash leaves either
    none or all of them. A `dbt` folder among the sources is the workspace's dbt project
    (/workspace/dbt), copied when the workspace has none."""
    project = os.path.join(WS, "dbt")
    if sources and os.path.isdir(os.path.join(sources, "dbt")) and not os.path.lexists(project):
        aside = f"{project}.{uuid.uuid4().hex}.init"
        shutil.copytree(os.path.join(sources, "dbt"), aside, symlinks=False)
        os.replace(aside, project)
    target = sandbox.database_path(WS)
    if os.path.exists(target):
        return
    aside = f"{target}.{uuid.uuid4().hex}.init"
    con = sandbox.connect(WS, aside, [sources] if sources else [])
    try:
        ensure_runs(con)
        files = sorted(os.listdir(sources)) if sources else []
        loaded = 0
        for f in files:
            kind = SOURCE_EXTENSIONS.get(os.path.splitext(f)[1].lower())
            if kind is None or loaded >= SOURCE_FILES_MAX:
                continue
            source = reader(kind, os.path.join(sources, f), {})
            con.execute(f'CREATE TABLE main."{table_name(f)}" AS SELECT * FROM {source}')
            loaded += 1
        con.execute("CHECKPOINT")
    finally:
        con.close()
    os.replace(aside, target)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sources", help="folder whose files a new conversation's database starts with")
    args = parser.parse_args()
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING)
    sources = os.path.realpath(args.sources) if args.sources else None
    if sources and not os.path.isdir(sources):
        sys.exit(f"--sources {args.sources} is not a folder")
    initialise(sources)
    mcp.run(transport="stdio")


if __name__ == "__main__":
    main()
