// The agentflow chat page: a client of the gateway's HTTP API (see the
// package doc of internal/chatpage, and docs/events.md for the events).
//
// On a local stack the gateway offers its dev token (GET /chat/dev.json,
// found only when the operator set one): a tab with no token of its own
// takes it, and the "Use the dev token" button brings it back.
//
// What the tab keeps (sessionStorage, this tab only):
//   agentflow.token  the bearer token, sent only as "Authorization: Bearer"
//   agentflow.chat   the chat: its session id, agent, and each turn as its
//                    events built it, with the index of the last event
//                    applied. Events are applied and the chat saved in one
//                    go, so that after a reload the turn being answered is
//                    followed after exactly the event the saved view holds.
"use strict";

const TOKEN_KEY = "agentflow.token";
const CHAT_KEY = "agentflow.chat";
const TERMINAL = new Set(["COMPLETED", "FAILED", "CANCELED"]);
const STREAMED = new Set(["text", "reasoning"]);

const $ = (id) => document.getElementById(id);

let chat = loadChat();
let token = sessionStorage.getItem(TOKEN_KEY) || "";
// dev is the local stack's dev token and its tenant ({token, tenant}),
// when the gateway offers one; null otherwise.
let dev = null;
// following is the job id of the turn whose events this page reads now.
let following = "";
// openRuns are the reasoning blocks a person opened, by turn and index;
// deciding, the calls whose decision is on its way; drafts, the answers
// being typed to questions, by turn and call, which must outlive the page
// rendering anew as events arrive (none of them is kept).
const openRuns = new Set();
const deciding = new Set();
const drafts = new Map();

// ---- the chat and its storage ----

function newChat(agent) {
  return { session: "chat-" + randomID(), agent: agent || "", seq: 0, turns: [] };
}

function loadChat() {
  try {
    const c = JSON.parse(sessionStorage.getItem(CHAT_KEY) || "null");
    if (c && typeof c.session === "string" && Array.isArray(c.turns)) return c;
  } catch (e) {
    // A chat that cannot be read is started afresh.
  }
  return newChat("");
}

function saveChat() {
  try {
    sessionStorage.setItem(CHAT_KEY, JSON.stringify(chat));
  } catch (err) {
    notice("This tab's storage is full (" + err.message + "): a reload will start a new chat. Start one with New chat.");
  }
}

function randomID() {
  const b = new Uint8Array(8);
  crypto.getRandomValues(b);
  return Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");
}

// ---- calls of the HTTP API ----

function headers(extra) {
  return Object.assign({ Authorization: "Bearer " + token }, extra || {});
}

// problemText reads a failed answer: an RFC 9457 problem's detail, else
// its status.
async function problemText(resp) {
  let text = resp.status + " " + resp.statusText;
  try {
    const p = await resp.json();
    if (p && p.detail) text = p.detail + " (" + resp.status + " " + (p.title || resp.statusText) + ")";
  } catch (e) {
    // Not a problem document: the status says enough.
  }
  return text;
}

async function callAPI(method, path, body) {
  const init = { method, headers: headers(body ? { "Content-Type": "application/json" } : {}) };
  if (body) init.body = JSON.stringify(body);
  const resp = await fetch(path, init);
  if (!resp.ok) throw new Error(await problemText(resp));
  return resp.json();
}

// turnPath is a turn's stream id as a path: turn/<tenant>/<job>, each
// segment escaped.
function turnPath(stream) {
  return stream.split("/").map(encodeURIComponent).join("/");
}

// ---- Server-Sent Events over fetch ----

// readEvents reads an event stream as the HTML standard says a browser
// does, calling onBatch with the events that each read of the body
// completed (so that a batch is applied and saved at once).
async function readEvents(resp, onBatch) {
  const reader = resp.body.getReader();
  const decoder = new TextDecoder();
  let buf = "";
  let ev = { id: null, type: "", data: [] };
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buf += decoder.decode(value, { stream: true });
    const batch = [];
    let nl;
    while ((nl = buf.search(/\r\n|\r|\n/)) >= 0) {
      // A lone \r at the end may be the first half of \r\n.
      if (buf[nl] === "\r" && nl === buf.length - 1) break;
      const line = buf.slice(0, nl);
      buf = buf.slice(nl + (buf.startsWith("\r\n", nl) ? 2 : 1));
      if (line === "") {
        if (ev.data.length > 0) batch.push({ id: ev.id, type: ev.type || "message", data: ev.data.join("\n") });
        ev = { id: null, type: "", data: [] };
        continue;
      }
      if (line.startsWith(":")) continue; // a comment: a keep-alive
      const colon = line.indexOf(":");
      const field = colon < 0 ? line : line.slice(0, colon);
      let val = colon < 0 ? "" : line.slice(colon + 1);
      if (val.startsWith(" ")) val = val.slice(1);
      if (field === "data") ev.data.push(val);
      else if (field === "event") ev.type = val;
      else if (field === "id" && !val.includes("\0")) ev.id = val;
    }
    if (batch.length > 0) onBatch(batch);
  }
}

// ---- a turn, folded from its events ----

function findTool(turn, callID) {
  return turn.items.find((it) => it.kind === "tool" && it.call_id === callID);
}

function toolItem(turn, e) {
  let t = findTool(turn, e.tool.call_id);
  if (!t) {
    t = { kind: "tool", i: e.event_index, call_id: e.tool.call_id, name: e.tool.name, deltas: [], state: "streaming" };
    turn.items.push(t);
  }
  return t;
}

// voidAttempt drops what a failed model-call attempt streamed: the
// streamed events from voidFrom up to the RETRYING status at upTo.
function voidAttempt(turn, voidFrom, upTo) {
  const dead = (i) => i >= voidFrom && i < upTo;
  turn.items = turn.items.filter((it) => {
    if (STREAMED.has(it.kind)) return !dead(it.i);
    if (it.kind === "tool") {
      it.deltas = it.deltas.filter((d) => !dead(d.i));
      // A call that only its void fragments announced is gone.
      return !(it.state === "streaming" && dead(it.i));
    }
    return true;
  });
}

// apply folds one event into its turn; an event at or before the last
// one applied changes nothing.
function apply(turn, e) {
  if (typeof e.event_index !== "number" || e.event_index <= turn.last) return;
  turn.last = e.event_index;
  if (!turn.stream && e.stream_id) turn.stream = e.stream_id;
  if (e.child) return; // a delegated turn's event: its text is not this turn's
  switch (e.kind) {
    case "status":
      turn.status = e.status;
      if (e.status === "RETRYING") {
        turn.retries = (turn.retries || 0) + 1;
        if (e.void_from) voidAttempt(turn, e.void_from, e.event_index);
      }
      if (e.error && !turn.error) turn.error = e.error.message;
      break;
    case "token":
      turn.items.push({ kind: "text", i: e.event_index, text: e.text || "" });
      break;
    case "reasoning":
      turn.items.push({ kind: "reasoning", i: e.event_index, text: e.text || "" });
      break;
    case "tool_args_delta": {
      const t = toolItem(turn, e);
      if (e.tool.args_delta) t.deltas.push({ i: e.event_index, text: e.tool.args_delta });
      break;
    }
    case "approval_required": {
      const t = toolItem(turn, e);
      t.args = e.tool.args;
      t.state = "waiting";
      t.reason = e.tool.reason || "";
      // What binds a decision to this call; a turn from before approvals
      // were bound has none, and takes the call id.
      t.approval_id = e.tool.approval_id || e.tool.call_id;
      break;
    }
    case "approval_decided": {
      const t = toolItem(turn, e);
      t.state = e.approval.outcome;
      t.decision = e.approval;
      t.problem = "";
      break;
    }
    case "question": {
      const t = toolItem(turn, e);
      t.args = e.tool.args;
      t.state = "asking";
      t.question = e.question;
      break;
    }
    case "question_answered": {
      const t = toolItem(turn, e);
      t.state = e.question.outcome;
      t.answered = e.question;
      t.problem = "";
      break;
    }
    case "tool_start": {
      const t = toolItem(turn, e);
      t.args = e.tool.args;
      t.state = "running";
      break;
    }
    case "tool_progress":
      toolItem(turn, e).progress = e.tool.message;
      break;
    case "tool_end": {
      const t = toolItem(turn, e);
      t.state = e.tool.status;
      t.output = e.tool.output || "";
      t.progress = "";
      break;
    }
    case "content":
      // The final answer, already streamed as tokens unless the turn did
      // not stream.
      if (e.content && e.content.type === "text" && !turn.items.some((it) => it.kind === "text")) {
        turn.items.push({ kind: "text", i: e.event_index, text: e.content.text || "" });
      }
      break;
    case "usage":
      if (e.usage) turn.tokens = (turn.tokens || 0) + (e.usage.total_tokens || 0);
      break;
    case "error":
      turn.error = e.error.message;
      break;
  }
}

// ---- following a turn ----

function lastTurn() {
  return chat.turns[chat.turns.length - 1];
}

function running(turn) {
  return turn && !TERMINAL.has(turn.status) && !turn.gaveUp;
}

// follow reads a turn's events until its terminal status: a new message
// is sent (send), else the turn is followed after the last event the page
// holds, through its stream when it is known, else (no event came yet) by
// sending the same message again, which its job id makes attach to the
// one sent.
async function follow(turn, send) {
  if (following === turn.job) return;
  following = turn.job;
  let wait = 500;
  try {
    while (running(turn) && token) {
      let resp;
      try {
        if (turn.stream && !send) {
          const h = headers({ Accept: "text/event-stream" });
          if (turn.last > 0) {
            h["Last-Event-ID"] = String(turn.last);
            turn.resumed = turn.last;
          }
          resp = await fetch("/v1/" + turnPath(turn.stream) + "/events:stream", { headers: h });
        } else {
          resp = await fetch("/v1/conversations/" + encodeURIComponent(turn.session) + "/messages:stream", {
            method: "POST",
            headers: headers({ "Content-Type": "application/json", Accept: "text/event-stream" }),
            body: JSON.stringify({ prompt: turn.prompt, job_id: turn.job, agent_id: turn.agent }),
          });
        }
        send = false;
        if (!resp.ok) {
          const text = await problemText(resp);
          // The gateway's limits and outages pass; anything else is the
          // request's own fault, and sending it again changes nothing.
          if (resp.status !== 429 && resp.status < 500) {
            turn.error = text;
            turn.gaveUp = true;
            break;
          }
          turn.note = text;
        } else {
          turn.note = "";
          await readEvents(resp, (batch) => {
            for (const ev of batch) {
              if (ev.type === "problem") {
                turn.note = JSON.parse(ev.data).detail || "the stream failed";
                continue;
              }
              apply(turn, JSON.parse(ev.data));
            }
            saveChat();
            render();
          });
          wait = 500;
        }
      } catch (err) {
        turn.note = "connection lost: " + err.message;
      }
      saveChat();
      render();
      if (running(turn)) {
        // The stream ended before the turn did (the gateway stopped, the
        // network dropped): follow on after the last event, soon.
        await new Promise((r) => setTimeout(r, wait));
        wait = Math.min(wait * 2, 10000);
      }
    }
  } finally {
    following = "";
    saveChat();
    render();
  }
}

// ---- actions ----

function notice(text) {
  const n = $("notice");
  n.textContent = text || "";
  n.hidden = !text;
}

async function useToken() {
  token = $("token").value.trim();
  if (token) sessionStorage.setItem(TOKEN_KEY, token);
  else sessionStorage.removeItem(TOKEN_KEY);
  showWho();
  await loadAgents();
  const t = lastTurn();
  if (running(t)) follow(t, false);
}

// offerDevToken asks the gateway for its dev token; a tab that holds no
// token takes it. A gateway without one answers 404: nothing is offered.
async function offerDevToken() {
  try {
    const resp = await fetch("/chat/dev.json", { cache: "no-store" });
    if (!resp.ok) return;
    const d = await resp.json();
    if (!d || typeof d.token !== "string" || !d.token) return;
    dev = { token: d.token, tenant: String(d.tenant || "") };
  } catch (e) {
    return; // no offer: the page asks for a token
  }
  $("dev-token").hidden = false;
  if (!token) {
    token = dev.token;
    $("token").value = token;
    sessionStorage.setItem(TOKEN_KEY, token);
  }
  showWho();
}

function useDevToken() {
  if (!dev) return;
  $("token").value = dev.token;
  useToken();
}

// showWho says when the page uses the dev token.
function showWho() {
  const who = $("who");
  const isDev = dev !== null && token === dev.token;
  who.textContent = isDev ? "signed in with the dev token" + (dev.tenant ? " (tenant " + dev.tenant + ")" : "") : "";
  who.hidden = !isDev;
}

async function loadAgents() {
  const sel = $("agent");
  sel.disabled = true;
  if (!token) {
    notice("Type a bearer token and press Use token.");
    return;
  }
  try {
    const res = await callAPI("GET", "/v1/agents");
    const agents = res.agents || [];
    sel.replaceChildren();
    for (const a of agents) {
      const o = document.createElement("option");
      o.value = a.id;
      o.textContent = a.id + (a.description ? " · " + a.description : "");
      sel.append(o);
    }
    const def = agents.find((a) => a.default);
    const keep = agents.find((a) => a.id === chat.agent);
    sel.value = keep ? keep.id : def ? def.id : agents.length ? agents[0].id : "";
    if (!chat.agent) chat.agent = sel.value;
    sel.disabled = agents.length === 0;
    notice(agents.length ? "" : "The token's tenant has no agents.");
  } catch (err) {
    notice("Agents: " + err.message);
  }
  render();
}

function startNewChat() {
  chat = newChat($("agent").value);
  openRuns.clear();
  saveChat();
  render();
}

// A conversation keeps the agent it started with: another agent is
// another chat.
function pickAgent() {
  if (chat.turns.length > 0) startNewChat();
  else {
    chat.agent = $("agent").value;
    saveChat();
  }
}

function sendMessage() {
  const prompt = $("prompt").value.trim();
  if (!prompt || !token || running(lastTurn())) return;
  chat.agent = chat.agent || $("agent").value;
  chat.seq += 1;
  const turn = { session: chat.session, agent: chat.agent, job: chat.session + "-" + chat.seq, prompt, stream: "", last: 0, status: "", items: [] };
  chat.turns.push(turn);
  $("prompt").value = "";
  saveChat();
  render();
  follow(turn, true);
}

async function decide(turn, tool, approved) {
  const key = turn.job + ":" + tool.call_id;
  deciding.add(key);
  tool.problem = "";
  render();
  try {
    await callAPI("POST", "/v1/" + turnPath(turn.stream) + "/approvals/" + encodeURIComponent(tool.call_id),
      { approval_id: tool.approval_id || tool.call_id, approved, reason: approved ? "approved in the chat page" : "rejected in the chat page" });
  } catch (err) {
    tool.problem = err.message;
  }
  deciding.delete(key);
  saveChat();
  render();
}

async function answer(turn, tool, text) {
  const key = turn.job + ":" + tool.call_id;
  if (!text.trim()) return;
  deciding.add(key);
  tool.problem = "";
  render();
  try {
    await callAPI("POST", "/v1/" + turnPath(turn.stream) + "/questions/" + encodeURIComponent(tool.call_id), { answer: text });
    drafts.delete(key);
  } catch (err) {
    tool.problem = err.message;
  }
  deciding.delete(key);
  saveChat();
  render();
}

// renderQuestion shows a question waiting for an answer: a button per
// choice, and a text field unless the answer must be one of them.
function renderQuestion(turn, t) {
  const q = t.question;
  const box = el("div", "question");
  box.append(el("p", "question-text", q.text));
  const key = turn.job + ":" + t.call_id;
  const busy = deciding.has(key);
  const row = el("div", "decision");
  for (const c of q.choices || []) {
    const b = el("button", "choice", c);
    b.type = "button";
    b.disabled = busy;
    b.addEventListener("click", () => answer(turn, t, c));
    row.append(b);
  }
  if (!(q.choices || []).length || q.allow_other) {
    const input = el("input", "answer-text");
    input.placeholder = "Your answer";
    input.dataset.key = key;
    input.value = drafts.get(key) || "";
    input.addEventListener("input", () => drafts.set(key, input.value));
    input.disabled = busy;
    const send = el("button", "approve", "Answer");
    send.type = "button";
    send.disabled = busy;
    send.addEventListener("click", () => answer(turn, t, input.value));
    input.addEventListener("keydown", (ev) => { if (ev.key === "Enter") answer(turn, t, input.value); });
    row.append(input, send);
  }
  box.append(row);
  return box;
}

async function cancelTurn(turn) {
  turn.note = "";
  try {
    await callAPI("POST", "/v1/" + turnPath(turn.stream) + "/cancel", { reason: "canceled in the chat page" });
  } catch (err) {
    turn.note = "Cancel: " + err.message;
  }
  render();
}

// ---- rendering ----

function el(tag, cls, text) {
  const n = document.createElement(tag);
  if (cls) n.className = cls;
  if (text !== undefined) n.textContent = text;
  return n;
}

function pretty(args) {
  if (args === undefined || args === null) return "";
  try {
    return JSON.stringify(typeof args === "string" ? JSON.parse(args) : args, null, 2);
  } catch (e) {
    return String(args);
  }
}

function renderTool(turn, t) {
  const box = el("div", "tool");
  box.dataset.call = t.call_id;
  const head = el("div", "tool-head");
  head.append(el("span", "label", "tool"), el("span", "tool-name", t.name));
  const state = t.state === "waiting" ? "waiting for approval" + (t.reason ? ": " + t.reason : "")
    : t.state === "asking" ? "waiting for your answer" : t.state;
  head.append(el("span", "tool-state " + t.state, state));
  if (t.decision) {
    const d = t.decision;
    head.append(el("span", "decided", d.outcome.replace("_", " ") + (d.approver ? " by " + d.approver : "") + (d.reason ? ": " + d.reason : "")));
  }
  if (t.answered && t.answered.answerer) head.append(el("span", "decided", "answered by " + t.answered.answerer));
  box.append(head);
  if (t.state === "asking" && running(turn)) box.append(renderQuestion(turn, t));
  const args = t.args !== undefined ? pretty(t.args) : t.deltas.map((d) => d.text).join("");
  if (args) box.append(el("div", "label", "arguments"), el("pre", "args", args));
  if (t.progress) box.append(el("div", "label", t.progress));
  if (t.output !== undefined && t.state !== "running") box.append(el("div", "label", "result"), el("pre", "output", t.output));
  if (t.state === "waiting" && running(turn)) {
    const row = el("div", "decision");
    const yes = el("button", "approve", "Approve");
    const no = el("button", "reject", "Reject");
    yes.type = no.type = "button";
    yes.disabled = no.disabled = deciding.has(turn.job + ":" + t.call_id);
    yes.addEventListener("click", () => decide(turn, t, true));
    no.addEventListener("click", () => decide(turn, t, false));
    row.append(yes, no);
    box.append(row);
  }
  if (t.problem) box.append(el("p", "problem", t.problem));
  return box;
}

// renderAnswer shows a turn's items in order, runs of text (and of
// reasoning) joined into one block each.
function renderAnswer(turn) {
  const box = el("div", "answer");
  let run = null;
  for (const it of turn.items) {
    if (it.kind === "tool") {
      run = null;
      box.append(renderTool(turn, it));
      continue;
    }
    if (run && run.kind === it.kind) {
      run.node.textContent += it.text;
      continue;
    }
    if (it.kind === "reasoning") {
      const key = turn.job + ":" + it.i;
      const d = el("details", "reasoning");
      d.open = openRuns.has(key);
      d.addEventListener("toggle", () => (d.open ? openRuns.add(key) : openRuns.delete(key)));
      const body = el("div", "", it.text);
      d.append(el("summary", "", "Reasoning"), body);
      box.append(d);
      run = { kind: it.kind, node: body };
    } else {
      const p = el("div", "text", it.text);
      box.append(p);
      run = { kind: it.kind, node: p };
    }
  }
  if (turn.error) box.append(el("p", "error", turn.error));
  const st = el("div", "status");
  const state = turn.status || "sending";
  st.append(el("span", "state " + state.toLowerCase(), state.toLowerCase().replace("_", " ")));
  if (turn.tokens) st.append(el("span", "", turn.tokens + " tokens"));
  if (turn.retries) st.append(el("span", "retries", "model call retried " + (turn.retries === 1 ? "once" : turn.retries + " times")));
  if (turn.resumed) st.append(el("span", "resumed", "resumed after event " + turn.resumed));
  if (turn.note) st.append(el("span", "note", turn.note));
  // The turn's page (/turn/<tenant>/<job>): its timeline, step by step.
  if (turn.stream && turn.stream.startsWith("turn/")) {
    const a = el("a", "turn-link", "see the turn");
    a.href = "/" + turnPath(turn.stream);
    st.append(a);
  }
  if (running(turn) && turn.stream) {
    const c = el("button", "cancel", "Cancel");
    c.type = "button";
    c.addEventListener("click", () => cancelTurn(turn));
    st.append(c);
  }
  box.append(st);
  return box;
}

function render() {
  const log = $("log");
  const nearBottom = window.innerHeight + window.scrollY >= document.body.scrollHeight - 80;
  // The answer field being typed in keeps the focus and the caret.
  const a = document.activeElement;
  const typing = a && a.classList.contains("answer-text") ? { key: a.dataset.key, from: a.selectionStart, to: a.selectionEnd } : null;
  const nodes = chat.turns.map((turn) => {
    const art = el("article", "turn");
    art.dataset.job = turn.job;
    art.dataset.last = String(turn.last);
    art.dataset.status = turn.status || "";
    art.append(el("div", "prompt", turn.prompt), renderAnswer(turn));
    return art;
  });
  log.replaceChildren(...nodes);
  const field = typing && [...log.querySelectorAll(".answer-text")].find((n) => n.dataset.key === typing.key);
  if (field && !field.disabled) {
    field.focus();
    field.setSelectionRange(typing.from, typing.to);
  }
  $("send").disabled = !token || !$("agent").value || running(lastTurn());
  $("session").textContent = "session " + chat.session + (chat.agent ? " · agent " + chat.agent : "");
  if (nearBottom) window.scrollTo(0, document.body.scrollHeight);
}

// ---- start ----

document.addEventListener("DOMContentLoaded", async () => {
  $("token").value = token;
  $("use-token").addEventListener("click", useToken);
  $("dev-token").addEventListener("click", useDevToken);
  $("token").addEventListener("keydown", (e) => {
    if (e.key === "Enter") useToken();
  });
  $("agent").addEventListener("change", pickAgent);
  $("new-chat").addEventListener("click", startNewChat);
  $("send").addEventListener("click", sendMessage);
  $("prompt").addEventListener("keydown", (e) => {
    if (e.key === "Enter" && !e.shiftKey) {
      e.preventDefault();
      sendMessage();
    }
  });
  render();
  await offerDevToken();
  render();
  loadAgents();
  // A turn that was being answered when the page was left goes on.
  const t = lastTurn();
  if (token && running(t)) follow(t, false);
});
