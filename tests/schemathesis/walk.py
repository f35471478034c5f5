"""A walk through a real run over the HTTP API, every answer checked against the document.

Schemathesis generates its own ids, so it mostly meets runs that do not exist (404). This walk
gives the document real data: it starts a run that waits for approvals and then reads and acts
on it through every route — state, log, checkpoints, sessions, the inbox, the audit export, a
command, a decision, a chat turn that waits for a human, a resume, a restore, a cancel, a finished
run's stream, a user's memory listed and deleted — and checks that each answer's status is
documented for its route and that its content type and body match what the document declares
for that status.

Usage: walk.py BASE_URL [TOKEN]
"""

import sys
import time

import requests
import schemathesis

base = sys.argv[1].rstrip("/")
token = sys.argv[2] if len(sys.argv) > 2 and sys.argv[2] else None
session = requests.Session()
if token:
    session.headers["Authorization"] = f"Bearer {token}"
schema = schemathesis.openapi.from_url(f"{base}/openapi.json")
checked = 0
QUERY = "집주인이 전세금 3억을 10억으로 올려달래. 법적으로 해결방법 알려줘"


def call(method, template, want, *, path=None, anonymous=False, **kwargs):
    """Sends one request (without the token if `anonymous`) and checks its answer against the
    document; returns the response."""
    global checked
    url = base + (path or template)
    response = (requests if anonymous else session).request(method, url, timeout=60, **kwargs)
    operation = schema[template][method]
    documented = operation.definition.raw["responses"]
    status = str(response.status_code)
    where = f"{method} {url}"
    if status not in documented:
        sys.exit(f"walk: {where} answered {status}, which the document does not declare: {response.text[:500]}")
    if response.status_code != want:
        sys.exit(f"walk: {where} answered {status}, expected {want}: {response.text[:500]}")
    try:
        operation.validate_response(response)
    except Exception as e:  # noqa: BLE001 - the failure group names what does not match
        sys.exit(f"walk: {where} ({status}) does not match the document: {e}")
    checked += 1
    return response


def wait_for(run, state, what):
    for _ in range(600):
        status = call("GET", "/api/v1/agent/{run_id}/status", 200, path=f"/api/v1/agent/{run}/status").json()
        if status["state"] == state:
            return status
        time.sleep(0.05)
    sys.exit(f"walk: run {run} never reached {state} ({what})")


def run_path(run, suffix=""):
    return f"/api/v1/agent/{run}{suffix}"


# A run that asks a human before each TODO.
started = call(
    "POST", "/api/v1/agent/run", 202,
    json={"query": QUERY, "hitl": "every_todo", "session_id": "walk-session", "approval_timeout_ms": 3_600_000},
).json()
run = started["run_id"]
status = wait_for(run, "waiting_for_approval", "the first approval")
approval = status["pending_approval_id"]

for suffix, template in [
    ("/status", "/api/v1/agent/{run_id}/status"),
    ("/approvals", "/api/v1/agent/{run_id}/approvals"),
    ("/todos", "/api/v1/agent/{run_id}/todos"),
    ("/state", "/api/v1/agent/{run_id}/state"),
    ("/state?at=0", "/api/v1/agent/{run_id}/state"),
    ("/log", "/api/v1/agent/{run_id}/log"),
    ("/log?from=1&limit=2", "/api/v1/agent/{run_id}/log"),
    ("/checkpoints", "/api/v1/agent/{run_id}/checkpoints"),
]:
    call("GET", template, 200, path=run_path(run, suffix))
call("GET", "/api/v1/agent/{run_id}/approvals/{approval_id}", 200, path=run_path(run, f"/approvals/{approval}"))
call("GET", "/api/sessions/{thread_id}", 200, path="/api/sessions/walk-session")
call("GET", "/api/sessions/{thread_id}/checkpoints", 200, path="/api/sessions/walk-session/checkpoints")
call("GET", "/api/v1/runs", 200)
call("GET", "/api/v1/runs", 200, path="/api/v1/runs?status=waiting_for_approval&limit=5")
call("GET", "/api/v1/approvals", 200)
call("GET", "/api/v1/approvals", 200, path="/api/v1/approvals?older_than=1d")

# Commands, then a decision through the approvals API.
for command in ["/todos", "/help", "/checkpoint list", "/todo approve"]:
    call("POST", "/api/v1/agent/{run_id}/commands", 200, path=run_path(run, "/commands"), json={"command": command})
call("POST", "/api/v1/agent/{run_id}/commands", 400, path=run_path(run, "/commands"), json={"command": "/frobnicate"})
status = wait_for(run, "waiting_for_approval", "the second approval")
second = status["pending_approval_id"]
call(
    "POST", "/api/v1/agent/{run_id}/approvals/{approval_id}/decision", 200,
    path=run_path(run, f"/approvals/{second}/decision"),
    json={"decision": "edit", "edited_args": {"region": "서초구"}, "comment": "narrowed"},
)
call(
    "POST", "/api/v1/agent/{run_id}/approvals/{approval_id}/decision", 409,
    path=run_path(run, f"/approvals/{second}/decision"), json={"decision": "approve"},
)
call("GET", "/api/v1/approvals", 200, path="/api/v1/approvals?status=edited")
call("GET", "/api/v1/audit/approvals", 200)
call("GET", "/api/v1/audit/approvals", 200, path=f"/api/v1/audit/approvals?format=csv&run_id={run}")

# Back to the first checkpoint, then cancel; a second cancel conflicts.
checkpoint = call("GET", "/api/v1/agent/{run_id}/checkpoints", 200, path=run_path(run, "/checkpoints")).json()[
    "checkpoints"
][0]["checkpoint_id"]
call(
    "POST", "/api/v1/agent/{run_id}/checkpoints/{checkpoint_id}/restore", 200,
    path=run_path(run, f"/checkpoints/{checkpoint}/restore"), json={},
)
call("POST", "/api/v1/agent/{run_id}/cancel", 200, path=run_path(run, "/cancel"), json={"reason": "the walk is done"})
call(
    "POST", "/api/v1/agent/{run_id}/cancel", 409,
    path=run_path(run, "/cancel"), data="null", headers={"Content-Type": "application/json"},
)

# The ended run's stream: its whole history, then the end; resumed past the end, nothing.
events = call("GET", "/api/v1/agent/{run_id}/events", 200, path=run_path(run, "/events"))
if "event: run.error" not in events.text and "event: run.end" not in events.text:
    sys.exit(f"walk: the ended run's stream did not end with its end: {events.text[-300:]}")
last = call("GET", "/api/v1/agent/{run_id}/status", 200, path=run_path(run, "/status")).json()["last_seq"]
call("GET", "/api/v1/agent/{run_id}/events", 204, path=run_path(run, "/events"), headers={"Last-Event-ID": str(last)})

# The same stream opened with a one-time stream ticket instead of the header (as a browser does);
# with tokens, the used ticket opens nothing more.
ticket = call("POST", "/api/v1/stream-tickets", 201, json={}).json()["ticket"]
ticketed = run_path(run, f"/events?ticket={ticket}")
call("GET", "/api/v1/agent/{run_id}/events", 200, path=ticketed, anonymous=True)
if token:
    call("GET", "/api/v1/agent/{run_id}/events", 401, path=ticketed, anonymous=True)

# A chat turn that waits for a human (409 with the approvals), answered by a resume.
call("POST", "/chat", 409, json={"message": QUERY, "thread_id": "walk-chat", "hitl": "every_todo"})
call("POST", "/chat", 200, json={"message": "/todos", "thread_id": "walk-chat"})
# Approving todo_001 lets the run go on to todo_002, where it waits again.
call("POST", "/api/sessions/{thread_id}/resume", 409, path="/api/sessions/walk-chat/resume", json={"approve": True})

# Sessions: the listing a page at a time, one session, a malformed cursor; then a delete (the
# chat session, whose run waits for a human: it is cancelled first), after which it is 404.
page = call("GET", "/api/v1/sessions", 200, path="/api/v1/sessions?limit=1").json()
if page["next_cursor"]:
    call("GET", "/api/v1/sessions", 200, path=f"/api/v1/sessions?limit=1&cursor={page['next_cursor']}")
call("GET", "/api/v1/sessions", 400, path="/api/v1/sessions?cursor=not-a-cursor")
call("GET", "/api/v1/sessions/{session_id}", 200, path="/api/v1/sessions/walk-session")
call("DELETE", "/api/v1/sessions/{session_id}", 200, path="/api/v1/sessions/walk-chat", json={})
call("GET", "/api/v1/sessions/{session_id}", 404, path="/api/v1/sessions/walk-chat")
call("DELETE", "/api/v1/sessions/{session_id}", 404, path="/api/v1/sessions/walk-chat", json={})

# A user's long-term memory: a run states a preference, which is listed, then deleted (again:
# 404), then every item at once.
memory_run = call(
    "POST", "/api/v1/agent/run", 202, json={"query": "강남구 전세만 보여줘", "session_id": "walk-memory"},
).json()["run_id"]
wait_for(memory_run, "completed", "a run that states a preference")
supervisor = call("GET", "/api/v1/agent/{run_id}/state", 200, path=run_path(memory_run, "/state")).json()["supervisor"]
memories = f"/api/v1/users/{supervisor.get('user_id') or supervisor['owner']}/memories"
listed = call("GET", "/api/v1/users/{user}/memories", 200, path=memories).json()["memories"]
if not listed:
    sys.exit(f"walk: GET {memories} listed nothing after a run that stated a preference")
one = f"{memories}/{listed[0]['memory_id']}"
call("DELETE", "/api/v1/users/{user}/memories/{memory_id}", 200, path=one, json={})
call("DELETE", "/api/v1/users/{user}/memories/{memory_id}", 404, path=one, json={})
call("DELETE", "/api/v1/users/{user}/memories", 200, path=memories, json={})

# The LangGraph routes, with the assistants' real ids (schemathesis's are mostly unknown: 404).
call("GET", "/info", 200)
assistants = call("POST", "/assistants/search", 200, json={"limit": 1000}).json()
for assistant in (assistants[0]["assistant_id"], assistants[-1]["graph_id"]):
    call("GET", "/assistants/{assistant_id}", 200, path=f"/assistants/{assistant}")
    call("GET", "/assistants/{assistant_id}/graph", 200, path=f"/assistants/{assistant}/graph?xray=false")
    call("GET", "/assistants/{assistant_id}/schemas", 200, path=f"/assistants/{assistant}/schemas")
call("GET", "/assistants/{assistant_id}", 404, path="/assistants/no-such-graph")
call("POST", "/assistants/search", 422, json={"limit": 0})

call("GET", "/healthz", 200)
call("GET", "/metrics", 200)
print(f"{checked} answers match the document")
