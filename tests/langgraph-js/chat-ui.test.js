// agent-chat-ui's conversation against a real `chronicle serve` (started by run.sh with approvals
// on every TODO, as a person runs it for the UI): its approval card's four actions, editing an
// earlier message and regenerating an answer, each sent by the UI's own hook (see ui.js) with the
// exact bodies it sends.

import assert from "node:assert/strict";
import { after, test } from "node:test";

import { openUi, requests, sentSince } from "./ui.js";

const url = process.env.CHRONICLE_URL;
const token = process.env.CHRONICLE_TOKEN;

// Each planned by the rules into two TODOs, the second after the first.
const GANGNAM = "강남구 아파트 전세 시세 알려줘";
const MAPO = "마포구 아파트 매매 시세 알려줘";
const SEOCHO = "서초구 아파트 전세 시세 알려줘";

const opened = [];
async function open() {
  const ui = await openUi({ url, token });
  opened.push(ui);
  return ui;
}
after(async () => {
  for (const ui of opened) await ui.close();
});

/** The text of a message (the UI sends text parts; the server answers with strings). */
function text(m) {
  return typeof m.content === "string"
    ? m.content
    : m.content.map((p) => p.text ?? "").join("");
}

const questions = (ui) => ui.messages.filter((m) => m.type === "human");
const answers = (ui) =>
  ui.messages.filter((m) => m.type === "ai" && !m.tool_calls?.length && text(m));

/** The run requests sent since `mark` (a UI action sends one). */
function runSent(mark) {
  const runs = sentSince(mark).filter((r) => r.path.endsWith("/runs/stream"));
  assert.equal(runs.length, 1, JSON.stringify(runs));
  return runs[0];
}

/** Approves every TODO of the turn the UI shows waiting, until it has answered. */
async function approveAll(ui) {
  for (let i = 0; ui.interrupt && i < 8; i++) await ui.approve();
  assert.equal(ui.interrupt, undefined, "the turn still waits");
  assert.equal(ui.messages.at(-1).type, "ai");
}

/** One whole turn: the question sent, each TODO approved, the answer shown. */
async function turn(ui, question) {
  await ui.send(question);
  assert.ok(ui.interrupt, "with approvals on, the turn waits for the first TODO's");
  await approveAll(ui);
}

/** The checkpoint the UI names in a run: the thread's head as its history showed it. */
function shownHead(ui) {
  const { checkpoint_id, checkpoint_ns } = ui.stream.history.at(-1).checkpoint;
  return { checkpoint_id, checkpoint_ns };
}

test("the approval card's four actions: submit an edit, approve, submit a rejection, mark as resolved", async () => {
  const ui = await open();
  await ui.send(GANGNAM);
  const [search] = ui.interrupt.value.action_requests;
  assert.equal(search.name, "property_search");

  // Submit, with the region edited.
  let head = shownHead(ui);
  let mark = requests.length;
  const edited = { ...search.args, region: "서울특별시 서초구" };
  await ui.editArgs({ region: "서울특별시 서초구" });
  const sent = runSent(mark);
  assert.deepEqual(sent.body, {
    input: {},
    command: {
      resume: {
        decisions: [{ type: "edit", edited_action: { name: "property_search", args: edited } }],
      },
    },
    stream_mode: ["messages-tuple", "values", "custom"],
    stream_resumable: false,
    assistant_id: "supervisor",
    checkpoint: head,
    on_disconnect: "cancel",
  });
  assert.equal(sent.status, 200);
  const calls = ui.messages.flatMap((m) => m.tool_calls ?? []);
  assert.deepEqual(calls[0].args, edited, "the search ran with the edited args");
  // The next step asks to work on what the person chose, not on the query's district.
  const [analysis] = ui.interrupt.value.action_requests;
  assert.equal(analysis.name, "market_analysis");
  assert.equal(analysis.args.region, "서울특별시 서초구", JSON.stringify(analysis.args));

  // Approve.
  head = shownHead(ui);
  mark = requests.length;
  await ui.approve();
  assert.deepEqual(runSent(mark).body.command, { resume: { decisions: [{ type: "approve" }] } });
  assert.deepEqual(runSent(mark).body.checkpoint, head);
  assert.equal(runSent(mark).status, 200);
  assert.equal(ui.interrupt, undefined);
  assert.equal(answers(ui).length, 1);
  // The analysis ran on the chosen district, and the answer speaks of it alone.
  const ran = ui.messages.flatMap((m) => m.tool_calls ?? []);
  assert.equal(ran[1].name, "market_analysis");
  assert.equal(ran[1].args.region, "서울특별시 서초구", JSON.stringify(ran[1].args));
  const answer = text(answers(ui)[0]);
  assert.ok(answer.includes("서초구") && !answer.includes("강남구"), answer);

  // Submit a rejection, in the next turn.
  await ui.send(MAPO);
  mark = requests.length;
  await ui.reject("not this search");
  assert.deepEqual(runSent(mark).body.command, {
    resume: { decisions: [{ type: "reject", message: "not this search" }] },
  });
  assert.equal(runSent(mark).body.input.constructor, Object);
  assert.equal(runSent(mark).status, 200);
  assert.equal(ui.interrupt, undefined);
  assert.equal(answers(ui).length, 2, "the turn ended with an answer");

  // Mark as resolved, in a third.
  await ui.send(SEOCHO);
  assert.ok(ui.interrupt);
  mark = requests.length;
  await ui.resolve();
  assert.deepEqual(runSent(mark).body.command, { goto: "__end__" });
  assert.deepEqual(runSent(mark).body.input, {});
  assert.equal(runSent(mark).status, 200);
  assert.equal(ui.interrupt, undefined);

  const thread = await ui.stream.client.threads.get(ui.threadId);
  assert.equal(thread.status, "idle");
  assert.deepEqual(thread.interrupts, {});
  assert.deepEqual(questions(ui).map(text), [GANGNAM, MAPO, SEOCHO]);
});

test("editing an earlier message branches the conversation from before it", async () => {
  const ui = await open();
  await turn(ui, GANGNAM);
  await turn(ui, MAPO);
  await turn(ui, SEOCHO);
  assert.deepEqual(questions(ui).map(text), [GANGNAM, MAPO, SEOCHO]);

  // The second question, edited: the UI runs from the checkpoint before it.
  const second = questions(ui)[1];
  let mark = requests.length;
  await ui.editMessage(second, "용산구 아파트 매매 시세 알려줘");
  const sent = runSent(mark);
  assert.deepEqual(sent.body.input, {
    messages: [{ type: "human", content: "용산구 아파트 매매 시세 알려줘" }],
  });
  assert.deepEqual(Object.keys(sent.body).sort(), [
    "assistant_id",
    "checkpoint",
    "input",
    "on_disconnect",
    "stream_mode",
    "stream_resumable",
    "stream_subgraphs",
  ]);
  assert.equal(sent.status, 200);
  // That checkpoint is the thread as the first turn left it.
  const before = await ui.stream.client.threads.getState(ui.threadId, sent.body.checkpoint.checkpoint_id);
  assert.deepEqual(before.values.messages.filter((m) => m.type === "human").map(text), [GANGNAM]);
  await approveAll(ui);
  assert.deepEqual(questions(ui).map(text), [GANGNAM, "용산구 아파트 매매 시세 알려줘"]);
  assert.equal(answers(ui).length, 2);
  // The new turn was given the first turn only, not the turns it replaced.
  assert.deepEqual(
    ui.stream.values.session_context.map((t) => t.query),
    [GANGNAM],
  );
  // Both versions of the question are branches the UI can switch between.
  assert.equal(ui.branches(questions(ui)[1]).options.length, 2);

  // The first question, edited: the conversation starts over.
  mark = requests.length;
  await ui.editMessage(questions(ui)[0], "마포구 아파트 전세 시세 알려줘");
  assert.equal(runSent(mark).status, 200);
  await approveAll(ui);
  assert.deepEqual(questions(ui).map(text), ["마포구 아파트 전세 시세 알려줘"]);
  assert.deepEqual(ui.stream.values.session_context, [], "no earlier turn");
  assert.equal(ui.branches(questions(ui)[0]).options.length, 2);
});

test("regenerating an answer asks its question again from before it", async () => {
  const ui = await open();
  await turn(ui, GANGNAM);
  await turn(ui, MAPO);
  const [first, second] = answers(ui);

  // The latest answer: its turn goes back to its start and runs again.
  let mark = requests.length;
  await ui.regenerate(second);
  const sent = runSent(mark);
  assert.deepEqual(Object.keys(sent.body).sort(), [
    "assistant_id",
    "checkpoint",
    "on_disconnect",
    "stream_mode",
    "stream_resumable",
    "stream_subgraphs",
  ]);
  assert.equal(sent.status, 200);
  await approveAll(ui);
  assert.deepEqual(questions(ui).map(text), [GANGNAM, MAPO]);
  assert.equal(answers(ui).length, 2);
  assert.equal(ui.branches(answers(ui)[1]).options.length, 2, "the old answer and the new");

  // The first answer: its question is asked again, after nothing (it was the first).
  mark = requests.length;
  await ui.regenerate(first);
  assert.equal(runSent(mark).status, 200);
  await approveAll(ui);
  assert.deepEqual(questions(ui).map(text), [GANGNAM]);
  assert.equal(answers(ui).length, 1);
  assert.deepEqual(ui.stream.values.session_context, [], "no earlier turn");
  assert.equal(ui.branches(questions(ui)[0]).options.length, 2);
});
