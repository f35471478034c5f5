"""What the LangGraph tests share: the server under test (started by tests/langgraph/run.sh,
which passes its URL, token and allowed browser origin in CHRONICLE_URL, CHRONICLE_TOKEN and
CHRONICLE_CORS_ORIGIN), an SDK client for it, and the queries the built-in real-estate domain
plans without a model."""

import asyncio
import os
import uuid

from langgraph_sdk import get_client

URL = os.environ["CHRONICLE_URL"]
TOKEN = os.environ["CHRONICLE_TOKEN"]
ORIGIN = os.environ["CHRONICLE_CORS_ORIGIN"]
AUTH = {"Authorization": f"Bearer {TOKEN}"}
# The namespace LangGraph derives graph assistants' ids in.
GRAPH_NAMESPACE = uuid.UUID("6ba7b821-9dad-11d1-80b4-00c04fd430c8")
SUPERVISOR_ID = str(uuid.uuid5(GRAPH_NAMESPACE, "supervisor"))

# Planned by the rules into two TODOs, the second after the first.
QUERY = "강남구 아파트 전세 시세 알려줘"
# Planned into four TODOs: after the first, two are ready at once (with the parallel strategy,
# both wait for an approval together).
FAN_OUT_QUERY = "10억 이하 아파트 투자 추천해줘"
# Run options: every TODO waits for a human's approval (the server's default is none).
HITL = {"configurable": {"hitl": "every_todo"}}
NO_HITL = {"configurable": {"hitl": "none"}}


def client(headers=AUTH):
    return get_client(url=URL, api_key=None, headers=headers)


def run(coro):
    return asyncio.run(coro)


def human(text=QUERY):
    """A run's input: one human message, as LangChain's dict form."""
    return {"messages": [{"type": "human", "content": text}]}


async def new_thread(c, **kw):
    return (await c.threads.create(**kw))["thread_id"]


async def collect(stream):
    """Every part of an SDK stream, in order."""
    return [part async for part in stream]


def recording(c):
    """The requests `c` sends from now on, as `(method, path)`, kept in the returned list."""
    seen = []

    async def hook(request):
        seen.append((request.method, request.url.path))

    c.http.client.event_hooks = {"request": [hook], "response": []}
    return seen
