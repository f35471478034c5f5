// agent-chat-ui without its page: the same `useStream` hook (the real one, from
// @langchain/langgraph-sdk/react, at the version agent-chat-ui locks) with the options its
// StreamProvider gives it (src/providers/Stream.tsx), rendered by React in Node, and the calls its
// buttons make, copied from its components:
//
// - send a message: src/components/thread/index.tsx, handleSubmit
// - edit a message: src/components/thread/messages/human.tsx, handleSubmitEdit
// - regenerate an answer: src/components/thread/index.tsx, handleRegenerate (the parent checkpoint
//   from messages/ai.tsx)
// - Approve, Submit (an edit), Submit (a rejection), Mark as Resolved:
//   src/components/thread/agent-inbox/hooks/use-interrupted-actions.tsx (resumeRun, handleResolve)
//
// Every request the hook sends is recorded (method, path, JSON body, status), so a test can say
// exactly what the UI sent and what it got.

import { randomUUID } from "node:crypto";
import { createElement, useState } from "react";
import TestRenderer, { act } from "react-test-renderer";
import { overrideFetchImplementation } from "@langchain/langgraph-sdk";
import { useStream } from "@langchain/langgraph-sdk/react";

// React's test mode: updates are flushed inside `act`, which awaits the hook's requests.
globalThis.IS_REACT_ACT_ENVIRONMENT = true;

/** Every request of every UI, in order: `{ method, path, body, status }`. */
export const requests = [];

overrideFetchImplementation(async (input, init = {}) => {
  const url = new URL(typeof input === "string" ? input : input.url);
  const entry = {
    method: init.method ?? "GET",
    path: url.pathname,
    body: typeof init.body === "string" ? JSON.parse(init.body) : undefined,
    status: undefined,
  };
  requests.push(entry);
  const res = await fetch(input, init);
  entry.status = res.status;
  return res;
});

/** The requests sent since `mark` (an index into `requests`), without the history reads. */
export function sentSince(mark, { reads = false } = {}) {
  return requests.slice(mark).filter((r) => reads || !r.path.endsWith("/history"));
}

/** agent-chat-ui, opened on `url` with `token` as its API key (a new thread until one is made). */
export async function openUi({ url, token, assistantId = "supervisor" }) {
  const ui = new Ui();
  function Chat() {
    const [threadId, setThreadId] = useState(null);
    const stream = useStream({
      apiUrl: url,
      apiKey: token,
      assistantId,
      threadId,
      fetchStateHistory: true,
      // The UI keeps the generative-UI messages that come as custom events (Chronicle's custom
      // events are its own events, none of them one); its reducer is left out with react-dom.
      onCustomEvent: (event, options) => {
        if (event?.type === "ui" || event?.type === "remove-ui") {
          options.mutate((prev) => ({ ...prev, ui: [...(prev.ui ?? []), event] }));
        }
      },
      onThreadId: (id) => setThreadId(id),
    });
    // What the UI's page reads on every render (which also decides the stream modes it asks for).
    for (const m of stream.messages) stream.getMessagesMetadata(m);
    void stream.interrupt;
    ui.stream = stream;
    ui.threadId = threadId;
    return null;
  }
  await act(async () => {
    ui.renderer = TestRenderer.create(createElement(Chat));
  });
  return ui;
}

class Ui {
  /** The hook's value at the last render. */
  stream;
  threadId;
  renderer;

  get messages() {
    return this.stream.messages;
  }

  /** The pending interrupt the UI shows as an approval card (agent-chat-ui's HITL request). */
  get interrupt() {
    return this.stream.interrupt;
  }

  async #act(call) {
    await act(async () => {
      await call();
    });
    if (this.stream.error) throw this.stream.error;
  }

  /** Types `text` and presses Send. */
  async send(text) {
    const newHumanMessage = {
      id: randomUUID(),
      type: "human",
      content: [{ type: "text", text }],
    };
    const toolMessages = ensureToolCallsHaveResponses(this.stream.messages);
    const context = undefined;
    await this.#act(() =>
      this.stream.submit(
        { messages: [...toolMessages, newHumanMessage], context },
        {
          streamMode: ["values"],
          streamSubgraphs: true,
          streamResumable: true,
          optimisticValues: (prev) => ({
            ...prev,
            context,
            messages: [...(prev.messages ?? []), ...toolMessages, newHumanMessage],
          }),
        },
      ),
    );
  }

  /** The approval card's buttons: one decision for the pending interrupt (resumeRun). */
  async decide(decision) {
    await this.#act(() =>
      this.stream.submit({}, { command: { resume: { decisions: [decision] } } }),
    );
  }

  approve() {
    return this.decide({ type: "approve" });
  }

  /** Submit with the edited args: agent-chat-ui's edit fields hold strings. */
  editArgs(changes) {
    const [action] = this.interrupt.value.action_requests;
    return this.decide({
      type: "edit",
      edited_action: { name: action.name, args: { ...action.args, ...changes } },
    });
  }

  reject(message) {
    return this.decide({ type: "reject", message });
  }

  /** Mark as Resolved (handleResolve; `END` of @langchain/langgraph is "__end__"). */
  async resolve() {
    await this.#act(() => this.stream.submit({}, { command: { goto: "__end__" } }));
  }

  /** The pencil on a human message, then Submit with `text` (handleSubmitEdit). */
  async editMessage(message, text) {
    const meta = this.stream.getMessagesMetadata(message);
    const parentCheckpoint = meta?.firstSeenState?.parent_checkpoint;
    const newMessage = { type: "human", content: text };
    await this.#act(() =>
      this.stream.submit(
        { messages: [newMessage] },
        {
          checkpoint: parentCheckpoint,
          streamMode: ["values"],
          streamSubgraphs: true,
          streamResumable: true,
          optimisticValues: (prev) => {
            const values = meta?.firstSeenState?.values;
            if (!values) return prev;
            return { ...values, messages: [...(values.messages ?? []), newMessage] };
          },
        },
      ),
    );
  }

  /** The regenerate button under an answer (handleRegenerate with the answer's parent). */
  async regenerate(message) {
    const meta = this.stream.getMessagesMetadata(message);
    const parentCheckpoint = meta?.firstSeenState?.parent_checkpoint;
    await this.#act(() =>
      this.stream.submit(undefined, {
        checkpoint: parentCheckpoint,
        streamMode: ["values"],
        streamSubgraphs: true,
        streamResumable: true,
      }),
    );
  }

  /** The branch switcher under `message`: its branch and the branches it may show. */
  branches(message) {
    const meta = this.stream.getMessagesMetadata(message);
    return { branch: meta?.branch, options: meta?.branchOptions ?? [] };
  }

  async close() {
    await act(async () => this.renderer.unmount());
  }
}

// src/lib/ensure-tool-responses.ts
const DO_NOT_RENDER_ID_PREFIX = "do-not-render-";

function ensureToolCallsHaveResponses(messages) {
  const newMessages = [];
  messages.forEach((message, index) => {
    if (message.type !== "ai" || message.tool_calls?.length === 0) return;
    const followingMessage = messages[index + 1];
    if (followingMessage && followingMessage.type === "tool") return;
    newMessages.push(
      ...(message.tool_calls?.map((tc) => ({
        type: "tool",
        tool_call_id: tc.id ?? "",
        id: `${DO_NOT_RENDER_ID_PREFIX}${randomUUID()}`,
        name: tc.name,
        content: "Successfully handled tool call.",
      })) ?? []),
    );
  });
  return newMessages;
}
