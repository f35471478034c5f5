// Chronicle console: the one script of the pages under /console/.
//
// It reads pages (HTML the server renders and escapes) and sends the JSON API's own requests:
// every change a person makes here goes through the same routes, checks and audit record as a
// client's. Text that comes from a run (streamed answer chunks) is put in with textContent,
// never as HTML. A signed-in page sends its session's CSRF token with each change; a server
// without tokens needs none.
(() => {
  'use strict';

  const csrf = () => {
    const m = document.querySelector('meta[name="csrf-token"]');
    return m ? m.content : '';
  };

  // A JSON request to the API; resolves to the answer's JSON, rejects with its error message.
  async function api(method, url, body) {
    const headers = { 'Content-Type': 'application/json' };
    if (csrf()) headers['X-CSRF-Token'] = csrf();
    const res = await fetch(url, {
      method,
      credentials: 'same-origin',
      headers,
      body: JSON.stringify(body === undefined ? {} : body),
    });
    let data = null;
    try {
      data = await res.json();
    } catch (_) {
      data = null;
    }
    if (!res.ok) {
      const msg = data && data.error ? data.error.message : `${res.status} ${res.statusText}`;
      throw new Error(msg);
    }
    return data;
  }

  function flash(message, bad) {
    const el = document.getElementById('flash');
    if (!el) return;
    el.textContent = message;
    el.className = bad ? 'flash bad' : 'flash';
    el.hidden = false;
  }

  // Fetches a page of this console and returns it parsed.
  async function page(url) {
    const res = await fetch(url, { credentials: 'same-origin', headers: { Accept: 'text/html' } });
    if (!res.ok) throw new Error(`${res.status} ${res.statusText} for ${url}`);
    return new DOMParser().parseFromString(await res.text(), 'text/html');
  }

  // Replaces each element of `ids` with the element of the same id in `doc`.
  function swap(doc, ids) {
    for (const id of ids) {
      const now = document.getElementById(id);
      const next = doc.getElementById(id);
      if (now && next) now.replaceWith(document.adoptNode(next));
    }
  }

  // Calls `fn` once after `ms` of quiet, however often it is asked.
  function debounce(fn, ms) {
    let t = null;
    return (...args) => {
      clearTimeout(t);
      t = setTimeout(() => fn(...args), ms);
    };
  }

  // Follows a stream of the API; `on(name, data)` for each named message.
  function follow(url, names, on) {
    const es = new EventSource(url);
    for (const name of names) {
      es.addEventListener(name, (ev) => {
        let data = null;
        try {
          data = JSON.parse(ev.data);
        } catch (_) {
          data = null;
        }
        on(name, data);
      });
    }
    return es;
  }

  // Every event name a stream can send, from the server's one table (the page carries it).
  const EVENT_NAMES = () => (document.body.dataset.events || '').split(' ').filter(Boolean);

  // ---------------------------------------------------------------- the run page

  function runPage(root) {
    const run = root.dataset.run;
    const base = `/console/runs/${run}`;
    const board = () => document.getElementById('board');
    const seqOf = () => Number(board().dataset.seq);
    const lastOf = () => Number(board().dataset.lastSeq);
    const scrubbed = () => seqOf() < lastOf();

    // One scrub step: the board at `seq`, the URL `?at=seq` to share.
    let scrubbing = 0;
    async function scrubTo(seq) {
      const last = lastOf();
      seq = Math.max(0, Math.min(last, seq));
      const ticket = ++scrubbing;
      const at = seq >= last ? '' : `?at=${seq}`;
      const doc = await page(`${base}/board${at}`);
      if (ticket !== scrubbing) return;
      swap(doc, ['board']);
      const url = new URL(location.href);
      if (at) url.searchParams.set('at', String(seq));
      else url.searchParams.delete('at');
      history.replaceState(null, '', url);
      const from = document.querySelector('.diff-form input[name="from"]');
      if (from) from.value = String(seq);
    }
    const scrubSoon = debounce((seq) => scrubTo(seq).catch((e) => flash(e.message, true)), 60);

    document.addEventListener('input', (ev) => {
      if (ev.target.id === 'scrub') {
        const out = document.getElementById('scrub-seq');
        if (out) out.textContent = `${ev.target.value} / ${lastOf()}`;
        scrubSoon(Number(ev.target.value));
      }
    });
    document.addEventListener('click', (ev) => {
      const a = ev.target.closest('#board a[data-seq], #timeline a[data-seq]');
      if (a && !ev.ctrlKey && !ev.metaKey && !ev.shiftKey) {
        ev.preventDefault();
        scrubTo(Number(a.dataset.seq)).catch((e) => flash(e.message, true));
      }
    });
    // The stepper's keys: n next, p previous, g go to a seq, c the next checkpoint.
    document.addEventListener('keydown', (ev) => {
      if (ev.ctrlKey || ev.metaKey || ev.altKey) return;
      const tag = (ev.target.tagName || '').toLowerCase();
      if (tag === 'input' && ev.target.type !== 'range') return;
      if (tag === 'textarea' || tag === 'select') return;
      const seq = seqOf();
      const go = (to) => scrubTo(to).catch((e) => flash(e.message, true));
      if (ev.key === 'n') go(seq + 1);
      else if (ev.key === 'p') go(seq - 1);
      else if (ev.key === 'g') {
        const to = prompt(`Go to seq (0–${lastOf()})`, String(seq));
        if (to !== null && /^\d+$/.test(to.trim())) go(Number(to.trim()));
      } else if (ev.key === 'c') {
        const ticks = (document.getElementById('scrub').dataset.ticks || '')
          .trim().split(/\s+/).filter(Boolean).map(Number).sort((a, b) => a - b);
        const next = ticks.find((t) => t > seq);
        if (next !== undefined) go(next);
        else if (ticks.length) go(ticks[0]);
      } else return;
      ev.preventDefault();
    });

    // Live: the page's parts follow the run's events without a reload.
    const refresh = debounce(async () => {
      try {
        const doc = await page(location.href);
        const parts = ['run-header', 'checkpoints', 'board'];
        const tl = document.getElementById('timeline');
        if (tl && tl.dataset.tail === 'true') parts.push('timeline');
        swap(doc, parts);
      } catch (e) {
        flash(e.message, true);
      }
    }, 150);
    // From the next seq on (the page shows what came before), and on past the run's end: a
    // restore makes it go on.
    follow(`/api/v1/agent/${run}/events?from=${lastOf() + 1}&follow=true`, EVENT_NAMES(), () => refresh());
  }

  // ---------------------------------------------------------------- lists that follow the log

  // A list that follows the log: `id`'s element is redrawn from `url` (the page itself, or a
  // fragment of it) after events of `names`, but never while a person is typing or editing in it.
  function liveList(id, url, names) {
    const busy = () => {
      const el = document.getElementById(id);
      if (!el) return false;
      if (el.contains(document.activeElement) && document.activeElement !== document.body) return true;
      if ([...el.querySelectorAll('.editor')].some((e) => !e.hidden)) return true;
      return [...el.querySelectorAll('input, textarea')].some((i) => i.value && i.defaultValue !== i.value);
    };
    const refresh = debounce(async () => {
      if (busy()) {
        refresh();
        return;
      }
      try {
        const doc = await page(url());
        const next = doc.getElementById(id) || doc.body.firstElementChild;
        const now = document.getElementById(id);
        if (now && next && next.id === id) now.replaceWith(document.adoptNode(next));
      } catch (e) {
        flash(e.message, true);
      }
    }, 400);
    follow('/api/v1/events', names, () => refresh());
  }

  // ---------------------------------------------------------------- a session's conversation

  function sessionPage(root) {
    const session = root.dataset.session;
    // The answer element of `run`, looked up each time: a redraw of the turns replaces it.
    const answerOf = (run) => document.querySelector(`#turns [data-answer="${run}"]`);
    const redraw = async () => {
      try {
        swap(await page(location.href), ['turns', 'pending']);
      } catch (e) {
        flash(e.message, true);
      }
    };
    const streamAnswer = (run) => {
      const es = follow(`/api/v1/agent/${run}/events?from=0`,
        ['message.chunk', 'message.final', 'run.end', 'run.error', 'run.interrupted', 'approval.decided'],
        async (name, data) => {
          // What a restore left behind is history, not where the run is.
          if (data && data.abandoned) return;
          const el = answerOf(run);
          if (name === 'message.chunk' && data && data.content && !data.content.agent) {
            if (el) el.textContent += data.content.text;
          } else if (name === 'message.final' && data) {
            const resp = data.content && data.content.final_response;
            let answer = null;
            if (resp && typeof resp.answer === 'string') answer = resp.answer;
            else if (typeof resp === 'string') answer = resp;
            if (answer !== null && el) el.textContent = answer;
          } else if (name === 'run.interrupted' || name === 'approval.decided') {
            // It waits for a person, or goes on: show the approval, or take it away.
            await redraw();
          } else if (name === 'run.end' || name === 'run.error') {
            es.close();
            await redraw();
          }
        });
    };
    if (root.dataset.liveRun) streamAnswer(root.dataset.liveRun);
    const form = document.getElementById('send');
    if (form) {
      form.addEventListener('submit', async (ev) => {
        ev.preventDefault();
        const text = form.elements.message.value;
        if (!text.trim()) return;
        try {
          const started = await api('POST', '/api/v1/agent/run', { query: text, session_id: session });
          const li = document.createElement('li');
          li.className = 'turn';
          li.dataset.run = started.run_id;
          const q = document.createElement('p');
          q.className = 'q text';
          q.textContent = text;
          const a = document.createElement('p');
          a.className = 'a text live';
          a.dataset.answer = started.run_id;
          li.append(q, a);
          document.getElementById('turns').append(li);
          form.elements.message.value = '';
          streamAnswer(started.run_id);
        } catch (e) {
          flash(e.message, true);
        }
      });
    }
  }

  // ---------------------------------------------------------------- actions

  async function decide(form, decision) {
    const { run, approval } = form.dataset;
    const body = { decision };
    const comment = form.elements.comment ? form.elements.comment.value.trim() : '';
    if (comment) body.comment = comment;
    if (decision === 'edit') {
      const area = form.querySelector('textarea[name="edited_args"]');
      const err = form.querySelector('[data-role="json-error"]');
      let args;
      try {
        args = JSON.parse(area.value);
      } catch (e) {
        err.textContent = `Not JSON: ${e.message}`;
        err.hidden = false;
        return;
      }
      if (args === null || typeof args !== 'object' || Array.isArray(args)) {
        err.textContent = 'The arguments must be a JSON object ({...}).';
        err.hidden = false;
        return;
      }
      err.hidden = true;
      body.edited_args = args;
    }
    await api('POST', `/api/v1/agent/${run}/approvals/${encodeURIComponent(approval)}/decision`, body);
    const card = form.closest('.approval');
    if (card) card.remove();
    const said = { approve: 'approved', reject: 'rejected', edit: 'approved with edited arguments' };
    flash(`${approval}: ${said[decision]}`);
  }

  document.addEventListener('click', async (ev) => {
    const el = ev.target.closest('[data-decision], [data-action], [data-copy]');
    if (!el) return;
    try {
      if (el.dataset.copy !== undefined) {
        await navigator.clipboard.writeText(el.dataset.copy);
        flash('Copied');
      } else if (el.dataset.decision === 'edit-open') {
        const editor = el.closest('form').querySelector('.editor');
        editor.hidden = !editor.hidden;
      } else if (el.dataset.decision) {
        el.disabled = true;
        try {
          await decide(el.closest('form'), el.dataset.decision);
        } finally {
          el.disabled = false;
        }
      } else if (el.dataset.action === 'cancel') {
        if (!confirm('Cancel this run (and its sub-agent runs)?')) return;
        await api('POST', `/api/v1/agent/${el.dataset.run}/cancel`, {});
        flash('Cancelled');
      } else if (el.dataset.action === 'restore') {
        if (!confirm(el.dataset.confirm)) return;
        await api('POST', `/api/v1/agent/${el.dataset.run}/checkpoints/${encodeURIComponent(el.dataset.checkpoint)}/restore`, {});
        const url = new URL(location.href);
        url.searchParams.delete('at');
        history.replaceState(null, '', url);
        swap(await page(url.href), ['run-header', 'board', 'checkpoints', 'timeline']);
        flash(`Restored ${el.dataset.checkpoint}`);
      } else if (el.dataset.action === 'logout') {
        await api('POST', '/console/logout', {});
        location.assign('/console/login');
      }
    } catch (e) {
      flash(e.message, true);
    }
  });

  document.addEventListener('submit', async (ev) => {
    const form = ev.target;
    if (form.id === 'login') {
      ev.preventDefault();
      try {
        await api('POST', '/console/session', { token: form.elements.token.value });
        form.elements.token.value = '';
        location.assign(form.dataset.next || '/console/');
      } catch (e) {
        flash(e.message, true);
      }
    } else if (form.id === 'start') {
      ev.preventDefault();
      const body = { query: form.elements.query.value, hitl: form.elements.hitl.value };
      const session = form.elements.session_id.value.trim();
      if (session) body.session_id = session;
      try {
        const started = await api('POST', '/api/v1/agent/run', body);
        location.assign(`/console/runs/${started.run_id}`);
      } catch (e) {
        flash(e.message, true);
      }
    }
  });

  // ---------------------------------------------------------------- start

  document.addEventListener('DOMContentLoaded', () => {
    const run = document.getElementById('board-live');
    if (run) runPage(document.getElementById('run-header'));
    const runs = document.getElementById('runs-live');
    if (runs) liveList('runs-table', () => runs.dataset.fragment, ['run.started', 'run.end', 'run.error', 'run.interrupted', 'run.resumed', 'run.restored']);
    if (document.getElementById('inbox')) liveList('inbox', () => location.href, ['approval.requested', 'approval.decided', 'approval.expired', 'run.end', 'run.restored']);
    const turns = document.getElementById('turns');
    if (turns) sessionPage(turns);
  });
})();
