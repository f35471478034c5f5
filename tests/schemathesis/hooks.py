"""What JSON Schema cannot say about Chronicle's requests, told to schemathesis's generator.

A fixed plan's step may depend only on agents that the same plan runs, and in agent mode (an
`agent`) a plan may only be that agent's one step (the server refuses others with 422, before
anything is written). Those are rules between fields, which JSON Schema cannot state, so a
generated request would be refused although it fits the document. The hook drops, from each
generated plan, the dependencies that name no agent of the plan, and the plan beside an agent;
it keeps everything else as generated, values of the wrong type included, so requests that do
not fit the document are still sent as they are.

A `/chat` message that starts with `/` is a command, and which commands exist is the server's
(an unknown one is refused with 400, recorded): JSON Schema cannot list them, so the hook makes a
generated message that starts with `/` a question (`?` for the `/`). The walk (walk.py) sends
real commands.

A LangGraph run (`POST .../runs`, `/runs/stream`, `/runs/wait`) needs a human message or a query
in its `input`, or else a command or a checkpoint that fit the thread's state (a pending
interrupt, an older checkpoint of its latest turn); its run options in `config.configurable` and
`context` are those of a Chronicle run. A generated run is made a new turn with a real query and
no options, for the supervisor (tests/langgraph/ drives the commands, checkpoints, options and
assistants). Every turn is real work, and every later read of its thread folds it: after the
first RUNS_PER_OPERATION of an operation, a generated run ends the thread's waiting turn
(`goto: "__end__"`; 409 when none waits), so the server's state stays small. A state update may
not set nothing (422): the hook gives an empty update one value. A bulk cancel names a thread
(perhaps with some of its runs) or a status: the hook gives one that names neither the status
`all`, and drops `run_ids` that name no thread. (A key of the workflow's own
state is a conflict, 409, which a generated request may meet.)
"""

import schemathesis


@schemathesis.hook
def map_case(context, case):
    # A case hook, not a body one: body hooks shape only the generated phases, and the coverage
    # phase builds its cases otherwise.
    # A case meant to break the document is left as it is: dropping the part of it that breaks
    # the document (a plan beside an agent) would turn it into a request the server must take.
    if case.operation.path == "/api/v1/agent/run" and not _negative(case):
        _plan_dependencies_in_plan(case.body)
        _no_plan_beside_an_agent(case.body)
    if case.operation.path == "/chat":
        _no_generated_command(case.body)
    if not _negative(case):
        if case.operation.path in LANGGRAPH_RUNS and case.operation.method.upper() == "POST":
            _a_new_turn(case.operation.path, case.body)
        if case.operation.path == "/threads/{thread_id}/state" and case.operation.method.upper() == "POST":
            _some_values(case.body)
        if case.operation.path == "/runs/cancel":
            _a_bulk_cancel_names_what(case.body)
    return case


LANGGRAPH_RUNS = {
    "/runs",
    "/runs/stream",
    "/runs/wait",
    "/threads/{thread_id}/runs",
    "/threads/{thread_id}/runs/stream",
    "/threads/{thread_id}/runs/wait",
}

RUNS_PER_OPERATION = 15
_runs_made = {}


def _a_new_turn(path, body):
    if not isinstance(body, dict):
        return
    made = _runs_made.get(path, 0)
    _runs_made[path] = made + 1
    for key in ("command", "checkpoint", "checkpoint_id", "config", "context", "input"):
        body.pop(key, None)
    body["assistant_id"] = "supervisor"
    if made < RUNS_PER_OPERATION:
        body["input"] = {"query": "강남구 아파트 전세 시세 알려줘"}
    else:
        body["command"] = {"goto": "__end__"}


def _some_values(body):
    if not isinstance(body, dict) or not isinstance(body.get("values"), dict):
        return
    if not body["values"]:
        body["values"] = {"note": 1}


def _negative(case):
    generation = getattr(getattr(case, "meta", None), "generation", None)
    mode = getattr(generation, "mode", None)
    return getattr(mode, "value", mode) == "negative"


def _no_generated_command(body):
    if isinstance(body, dict) and isinstance(body.get("message"), str) and body["message"].startswith("/"):
        body["message"] = "?" + body["message"][1:]


def _no_plan_beside_an_agent(body):
    if isinstance(body, dict) and isinstance(body.get("agent"), str):
        body.pop("plan", None)


def _plan_dependencies_in_plan(body):
    if not isinstance(body, dict) or not isinstance(body.get("plan"), list):
        return
    steps = [s for s in body["plan"] if isinstance(s, dict)]
    agents = {s.get("agent_name") for s in steps if isinstance(s.get("agent_name"), str)}
    for step in steps:
        deps = step.get("dependencies")
        if isinstance(deps, list):
            step["dependencies"] = [d for d in deps if not isinstance(d, str) or d in agents]


def _a_bulk_cancel_names_what(body):
    if not isinstance(body, dict):
        return
    if body.get("thread_id") is None:
        body.pop("run_ids", None)
        if body.get("status") is None:
            body["status"] = "all"
