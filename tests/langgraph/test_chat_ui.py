"""agent-chat-ui's requests replayed over raw HTTP, with the bodies it sends: list the threads
of the graph, make a thread, stream a turn (values, messages as tuples, custom events; resumable),
read the history, resume an interrupt with the actionable decisions, and a second turn. (Its own
hook sends them in tests/langgraph-js/.)"""

import json
import uuid

import httpx
from conftest import AUTH, ORIGIN, QUERY, SUPERVISOR_ID, URL

UI = {**AUTH, "Origin": ORIGIN}


def http():
    return httpx.Client(base_url=URL, headers=UI, timeout=60)


def sse(res):
    """The frames of an SSE response: `(event, data, id)` each."""
    frames, event, data, eid = [], None, [], None
    for line in res.iter_lines():
        if line == "":
            if event is not None or data:
                frames.append((event, json.loads("\n".join(data)) if data else None, eid))
            event, data, eid = None, [], None
        elif line.startswith(":"):
            continue
        else:
            field, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if field == "event":
                event = value
            elif field == "data":
                data.append(value)
            elif field == "id":
                eid = value
    if event is not None or data:
        frames.append((event, json.loads("\n".join(data)) if data else None, eid))
    return frames


def human_message(text):
    return {"id": str(uuid.uuid4()), "type": "human", "content": [{"type": "text", "text": text}]}


def stream_body(extra):
    return {
        "stream_mode": ["values", "messages-tuple", "custom"],
        "stream_subgraphs": True,
        "stream_resumable": True,
        "on_disconnect": "continue",
        "assistant_id": "supervisor",
        **extra,
    }


def command_body(command, checkpoint):
    """What the UI's approval card sends (`useStream().submit({}, {command})`): an empty input
    beside the command, the head it shows (without its thread id), the stream modes the page
    reads, not resumable, cancelled when the page goes."""
    return {
        "input": {},
        "command": command,
        "stream_mode": ["messages-tuple", "values", "custom"],
        "stream_resumable": False,
        "assistant_id": "supervisor",
        "checkpoint": {k: v for k, v in checkpoint.items() if k != "thread_id"},
        "on_disconnect": "cancel",
    }


def send(h, thread, text, checkpoint, config=None, message=None):
    """The UI sends a message: the turn's stream, whole."""
    message = message or human_message(text)
    body = stream_body({"input": {"messages": [message]}, "checkpoint": checkpoint})
    if config:
        body["config"] = config
    with h.stream("POST", f"/threads/{thread}/runs/stream", json=body) as res:
        assert res.status_code == 200, res.read()
        return res, sse(res)


def head_of(h, thread):
    history = h.post(f"/threads/{thread}/history", json={"limit": 10})
    assert history.status_code == 200, history.text
    states = history.json()
    return states, (states[0]["checkpoint"] if states else None)


def content_text(m):
    """A message's text: its content string, or its text parts joined (the UI sends parts)."""
    c = m["content"]
    return c if isinstance(c, str) else "".join(p["text"] for p in c if p.get("type") == "text")


def check_message(m):
    assert m["type"] in ("human", "ai", "tool", "system"), m
    assert isinstance(m["id"], str) and m["id"]
    assert "content" in m
    if m["type"] == "ai":
        for call in m.get("tool_calls", []):
            assert set(call) >= {"name", "args", "id", "type"} and call["type"] == "tool_call"
    if m["type"] == "tool":
        assert m["tool_call_id"]


def test_the_chat_ui_flow_with_an_approval():
    h = http()
    assert h.get("/info").status_code == 200
    listed = h.post("/threads/search", json={"metadata": {"graph_id": "supervisor"}, "limit": 100})
    assert listed.status_code == 200 and isinstance(listed.json(), list)

    made = h.post("/threads", json={"metadata": {}})
    assert made.status_code == 200, made.text
    thread = made.json()["thread_id"]
    states, head = head_of(h, thread)
    assert states == [] and head is None

    res, frames = send(h, thread, QUERY, head, {"configurable": {"hitl": "every_todo"}})
    assert res.headers["content-type"].startswith("text/event-stream")
    run_id = frames[0][1]["run_id"]
    assert res.headers["location"] == f"/threads/{thread}/runs/{run_id}/stream"
    assert res.headers["content-location"] == f"/threads/{thread}/runs/{run_id}"
    assert res.headers["access-control-allow-origin"] == ORIGIN
    names = [f[0] for f in frames]
    assert names[0] == "metadata"
    assert {"values", "messages", "custom"} <= set(names), names
    assert any(f[2] is not None for f in frames), "a resumable stream carries ids"
    ids = [int(f[2]) for f in frames if f[2] is not None]
    assert ids == sorted(ids)
    for event, data, _ in frames:
        if event == "messages":
            message, meta = data
            if message["type"] != "AIMessageChunk":
                check_message(message)
            assert meta["run_id"] == run_id
    last = [d for e, d, _ in frames if e == "values"][-1]
    [interrupt] = last["__interrupt__"]
    value = interrupt["value"]
    [action] = value["action_requests"]
    assert action["name"] == "property_search" and isinstance(action["args"], dict)
    [review] = value["review_configs"]
    assert review["action_name"] == "property_search"
    assert set(review["allowed_decisions"]) <= {"approve", "edit", "reject"}
    assert "approve" in review["allowed_decisions"]

    states, head = head_of(h, thread)
    assert states[0]["tasks"][0]["interrupts"][0]["id"] == interrupt["id"]
    assert content_text(states[0]["values"]["messages"][0]) == QUERY

    # Approve both TODOs, one at a time, as the UI's buttons do.
    for _ in range(2):
        body = command_body({"resume": {"decisions": [{"type": "approve"}]}}, head)
        with h.stream("POST", f"/threads/{thread}/runs/stream", json=body) as res:
            assert res.status_code == 200, res.read()
            frames = sse(res)
        assert frames[0][0] == "metadata" and "error" not in [f[0] for f in frames]
        states, head = head_of(h, thread)
    final = states[0]["values"]
    assert "__interrupt__" not in final
    assert states[0]["next"] == []
    messages = final["messages"]
    for m in messages:
        check_message(m)
    assert messages[0]["type"] == "human"
    assert messages[-1]["type"] == "ai" and messages[-1]["content"]
    calls = [c["id"] for m in messages if m["type"] == "ai" for c in m.get("tool_calls", [])]
    assert [m["tool_call_id"] for m in messages if m["type"] == "tool"] == calls
    assert len(calls) == 2

    # The sidebar shows the thread by its first message.
    found = h.post("/threads/search", json={"metadata": {"graph_id": "supervisor"}, "limit": 100}).json()
    [mine] = [t for t in found if t["thread_id"] == thread]
    assert content_text(mine["values"]["messages"][0]) == QUERY
    assert mine["metadata"]["assistant_id"] == SUPERVISOR_ID
    assert mine["status"] == "idle"


def test_a_second_turn_keeps_both_turns_messages_in_order():
    h = http()
    thread = h.post("/threads", json={"metadata": {}}).json()["thread_id"]
    _, frames = send(h, thread, QUERY, None)
    assert [f[0] for f in frames][-1] == "values"
    states, head = head_of(h, thread)
    first = states[0]["values"]["messages"]
    second_query = "마포구 아파트 매매 시세 알려줘"
    _, frames = send(h, thread, second_query, head)
    assert "error" not in [f[0] for f in frames]
    # The stream's messages are the new turn's only.
    streamed = [d[0] for e, d, _ in frames if e == "messages" and d[0]["type"] == "human"]
    assert [content_text(m) for m in streamed] == [second_query]
    states, _ = head_of(h, thread)
    both = states[0]["values"]["messages"]
    assert both[: len(first)] == first
    # The second turn's question, then its work and answer, after the first turn's messages.
    assert both[len(first)]["type"] == "human" and content_text(both[len(first)]) == second_query
    assert [content_text(m) for m in both if m["type"] == "human"] == [QUERY, second_query]
    assert both[-1]["type"] == "ai" and both[-1]["content"]
    assert len({m["id"] for m in both}) == len(both)


def test_a_resolved_interrupt_ends_the_turn():
    h = http()
    thread = h.post("/threads", json={"metadata": {}}).json()["thread_id"]
    send(h, thread, QUERY, None, {"configurable": {"hitl": "every_todo"}})
    _, head = head_of(h, thread)
    body = command_body({"goto": "__end__"}, head)
    with h.stream("POST", f"/threads/{thread}/runs/stream", json=body) as res:
        assert res.status_code == 200, res.read()
        frames = sse(res)
    assert frames[0][0] == "metadata"
    got = h.get(f"/threads/{thread}").json()
    assert got["status"] == "idle"
    assert got["interrupts"] == {}


def test_a_reject_with_a_message_and_the_stream_of_a_run_rejoined():
    h = http()
    thread = h.post("/threads", json={"metadata": {}}).json()["thread_id"]
    _, frames = send(h, thread, QUERY, None, {"configurable": {"hitl": "every_todo"}})
    run_id = frames[0][1]["run_id"]
    _, head = head_of(h, thread)
    body = command_body({"resume": {"decisions": [{"type": "reject", "message": "no search"}]}}, head)
    with h.stream("POST", f"/threads/{thread}/runs/stream", json=body) as res:
        assert res.status_code == 200, res.read()
        sse(res)
    assert h.get(f"/threads/{thread}").json()["status"] == "idle"
    # The first run's stream again, from its start, as a reconnecting browser asks.
    with h.stream("GET", f"/threads/{thread}/runs/{run_id}/stream", headers={"Last-Event-ID": "-1"}) as res:
        assert res.status_code == 200
        again = sse(res)
    strip = lambda fs: [(e, d) for e, d, _ in fs if e != "metadata"]  # noqa: E731
    assert strip(again) == strip(frames)


def test_the_uis_message_keeps_its_id():
    """The UI shows its message at once (optimistic values) under the id it made; LangGraph keeps
    a message's given id, so the one in the thread's values is the same message."""
    h = http()
    thread = h.post("/threads", json={"metadata": {}}).json()["thread_id"]
    sent = human_message(QUERY)
    _, frames = send(h, thread, QUERY, None, message=sent)
    states, _ = head_of(h, thread)
    first_values = next(d for e, d, _ in frames if e == "values")
    assert first_values["messages"][0]["id"] == sent["id"]
    assert states[0]["values"]["messages"][0]["id"] == sent["id"]
