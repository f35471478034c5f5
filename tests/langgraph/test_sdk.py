"""The real `langgraph-sdk` against a real `chronicle serve` (started by tests/langgraph/run.sh,
which passes its URL, token and allowed browser origin in CHRONICLE_URL, CHRONICLE_TOKEN and
CHRONICLE_CORS_ORIGIN): a LangGraph user gives the SDK the server's plain URL and finds the
assistants; errors come back as the SDK's typed exceptions."""

import uuid

import httpx
import pytest
from conftest import AUTH, GRAPH_NAMESPACE, ORIGIN, SUPERVISOR_ID, URL, client, run
from langgraph_sdk.errors import AuthenticationError, NotFoundError, UnprocessableEntityError

SUPERVISOR_NODES = [
    "__start__",
    "initialize",
    "analyze_intent",
    "build_plan",
    "execute_todo",
    "evaluate",
    "aggregate",
    "generate_response",
    "__end__",
]


def test_search_finds_the_supervisor_and_one_assistant_per_agent():
    async def go():
        c = client()
        found = await c.assistants.search(limit=100)
        first = await c.assistants.search(limit=1)
        only = await c.assistants.search(graph_id="supervisor")
        by_meta = await c.assistants.search(metadata={"created_by": "system"}, limit=100)
        nobody = await c.assistants.search(metadata={"created_by": "somebody"})
        return found, first, only, by_meta, nobody

    found, first, only, by_meta, nobody = run(go())
    assert len(found) >= 2, found
    supervisor = found[0]
    assert supervisor["assistant_id"] == SUPERVISOR_ID
    assert supervisor["graph_id"] == "supervisor"
    assert supervisor["metadata"] == {"created_by": "system"}
    assert supervisor["version"] == 1
    assert supervisor["config"] == {} and supervisor["context"] == {}
    # Every assistant's id is the graph's UUIDv5; graph ids are unique.
    for a in found:
        assert a["assistant_id"] == str(uuid.uuid5(GRAPH_NAMESPACE, a["graph_id"])), a
        assert a["created_at"] == supervisor["created_at"]
    assert len({a["graph_id"] for a in found}) == len(found)
    assert first == [supervisor]
    assert only == [supervisor]
    assert by_meta == found
    assert nobody == []


def test_get_by_id_and_by_graph_id():
    async def go():
        c = client()
        return await c.assistants.get(SUPERVISOR_ID), await c.assistants.get("supervisor")

    by_id, by_graph = run(go())
    assert by_id == by_graph
    assert by_id["graph_id"] == "supervisor"


def test_graph_and_schemas():
    async def go():
        c = client()
        return (
            await c.assistants.get_graph(SUPERVISOR_ID),
            await c.assistants.get_graph("supervisor", xray=True),
            await c.assistants.get_schemas(SUPERVISOR_ID),
        )

    graph, xray, schemas = run(go())
    assert [n["id"] for n in graph["nodes"]] == SUPERVISOR_NODES
    assert xray == graph
    ids = set(SUPERVISOR_NODES)
    for e in graph["edges"]:
        assert e["source"] in ids and e["target"] in ids, e
    assert {"source": "generate_response", "target": "__end__", "conditional": False} in graph["edges"]
    assert schemas["graph_id"] == "supervisor"
    for key in ("input_schema", "output_schema", "state_schema", "config_schema", "context_schema"):
        assert schemas[key]["type"] == "object", key


def test_an_unknown_assistant_is_the_sdks_not_found():
    async def go():
        c = client()
        with pytest.raises(NotFoundError) as unknown_graph:
            await c.assistants.get("no-such-graph")
        with pytest.raises(NotFoundError):
            await c.assistants.get(str(uuid.uuid4()))
        with pytest.raises(NotFoundError):
            await c.assistants.get_graph("no-such-graph")
        with pytest.raises(UnprocessableEntityError):
            await c.assistants.search(limit=0)
        return unknown_graph.value

    err = run(go())
    assert err.body == {"detail": err.body["detail"]}
    assert "no-such-graph" in str(err)


def test_without_the_token_the_sdk_raises_authentication_error():
    async def go():
        with pytest.raises(AuthenticationError) as e:
            await client(headers=None).assistants.search()
        return e.value

    err = run(go())
    assert set(err.body) == {"detail"}


def test_info_over_http():
    info = httpx.get(f"{URL}/info", headers=AUTH)
    assert info.status_code == 200
    body = info.json()
    assert body["flags"]["assistants"] is True
    assert body["flags"]["crons"] is False
    assert isinstance(body["version"], str) and body["version"]
    refused = httpx.get(f"{URL}/info")
    assert refused.status_code == 401
    assert set(refused.json()) == {"detail"}


def test_pagination_headers_and_what_a_browser_ui_may_read():
    res = httpx.post(
        f"{URL}/assistants/search",
        json={"limit": 1, "offset": 0},
        headers={**AUTH, "Origin": ORIGIN},
    )
    assert res.status_code == 200
    total = int(res.headers["x-pagination-total"])
    assert total >= 2 and len(res.json()) == 1
    assert res.headers["x-pagination-next"] == "1"
    assert res.headers["access-control-allow-origin"] == ORIGIN
    exposed = {h.strip().lower() for h in res.headers["access-control-expose-headers"].split(",")}
    assert {"content-location", "x-pagination-total", "x-pagination-next"} <= exposed
    last = httpx.post(f"{URL}/assistants/search", json={"limit": 1, "offset": total - 1}, headers=AUTH)
    assert "x-pagination-next" not in last.headers
    # A browser's preflight for the SDK's request.
    preflight = httpx.options(
        f"{URL}/assistants/search",
        headers={
            "Origin": ORIGIN,
            "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "authorization, content-type",
        },
    )
    assert preflight.status_code == 200
    assert preflight.headers["access-control-allow-origin"] == ORIGIN
    # Another origin is refused, in LangGraph's error shape.
    evil = httpx.get(f"{URL}/info", headers={**AUTH, "Origin": "http://evil.example"})
    assert evil.status_code == 403
    assert set(evil.json()) == {"detail"}
