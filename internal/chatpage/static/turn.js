// The agentflow turn page, /turn/{tenant}/{job}: a client of the gateway's
// HTTP API showing a turn's timeline (GET /v1/turn/{tenant}/{job}/timeline,
// the JSON of internal/timeline), step by step on a waterfall, the request
// a model call read (GET .../timeline/steps/{seq}/request) on demand, and
// "try again from here" (POST /v1/turn/{tenant}/{job}/retry), whose turn
// it compares with this one (diff.js, as the evaluation report does).
// The token is the chat page's (page.js). Everything from the turn is set
// as text.
"use strict";

const P = globalThis.agentflowPage;
const D = globalThis.agentflowDiff;

const PAGE = 200; // steps a page of the timeline asks for
const MIN_BAR = 0.4; // the narrowest bar, in % of the turn
const POLL_MS = 1000; // how often a turn tried again is read
const POLL_FOR_MS = 120000; // and for how long

// ---- what the page computes (no DOM: the tests load these alone) ----

function ms(iso) {
  const t = Date.parse(iso || "");
  return isNaN(t) ? NaN : t;
}

// span is the turn's duration in ms, the waterfall's width: its total,
// else from its start to its end, never 0.
function span(tl) {
  const total = Number(tl.totals && tl.totals.duration_ms) || 0;
  if (total > 0) return total;
  const d = ms(tl.ended_at) - ms(tl.started_at);
  return d > 0 ? d : 1;
}

// geometry is a step's bar on the waterfall, in % of the turn: left is
// from the turn's start to the step's, width the step's duration (at
// least MIN_BAR, so that a quick step shows), both within 0..100.
function geometry(item, turnStart, total) {
  const start = ms(item.started_at) - ms(turnStart);
  let left = isNaN(start) ? 0 : (100 * start) / total;
  let width = (100 * (Number(item.duration_ms) || 0)) / total;
  left = Math.min(Math.max(left, 0), 100);
  width = Math.min(Math.max(width, MIN_BAR), 100);
  if (left + width > 100) left = 100 - width;
  return { left, width };
}

// layout is what a page of steps adds to the list, in order: each item,
// and before the first item of each run after the first a run boundary
// ({boundary: run index}). seen holds the runs already begun (across
// pages); layout adds to it.
function layout(items, seen) {
  const out = [];
  for (const item of items) {
    const run = typeof item.run === "number" ? item.run : -1;
    if (run >= 0 && !seen.has(run)) {
      seen.add(run);
      if (run > 0) out.push({ boundary: run });
    }
    out.push({ item });
  }
  return out;
}

// compact is a call's arguments on one line.
function compact(args) {
  if (args === undefined || args === null) return "";
  return typeof args === "string" ? args : JSON.stringify(args);
}

function pretty(args) {
  if (args === undefined || args === null) return "";
  try {
    return JSON.stringify(typeof args === "string" ? JSON.parse(args) : args, null, 2);
  } catch (e) {
    return String(args);
  }
}

// side is what the diff compares of a turn: its answer (the text of its
// last model call) and its tool calls ("name args", as the evaluation
// report's calls {tool, arguments}).
function side(items) {
  let answer = "";
  const calls = [];
  for (const it of items) {
    if (it.kind === "model_call") answer = it.text || "";
    if (it.kind === "tool_call" && it.tool) calls.push({ tool: it.tool.name, arguments: compact(it.tool.args) });
  }
  return { answer, calls };
}

// retryBody is the POST .../retry of the form's fields for an item: the
// prompt on a prompt's step, the call's result on a tool call's (left
// out when it is the clipped preview, unchanged), the model and the
// version when set.
function retryBody(item, f) {
  const body = { seq: item.seq };
  if (item.kind === "prompt") body.prompt = f.prompt;
  if (item.kind === "tool_call" && item.tool) {
    const unchanged = f.result === (item.tool.result || "");
    if (!(unchanged && item.tool.result_clipped)) body.results = [{ call_id: item.tool.call_id, result: f.result }];
  }
  if (f.model && f.model.trim()) body.model = f.model.trim();
  const v = parseInt(f.version, 10);
  if (f.version !== "" && f.version !== undefined && !isNaN(v)) body.agent_version = v;
  return body;
}

function tokensText(it) {
  const parts = ["in " + (it.input_tokens || 0), "out " + (it.output_tokens || 0)];
  if (it.cached_tokens) parts.push("cached " + it.cached_tokens);
  if (it.reasoning_tokens) parts.push("reasoning " + it.reasoning_tokens);
  return parts.join(" · ") + " tokens";
}

// approvalText says how a call behind approval was decided.
function approvalText(a) {
  let s = String(a.outcome || "").replace("_", " ");
  if (a.approver) s += " by " + a.approver;
  if (a.via) s += " via " + a.via;
  if (a.decided_at) s += " at " + P.time(a.decided_at);
  const waited = ms(a.decided_at) - ms(a.requested_at);
  if (!isNaN(waited) && waited >= 0) s += ", waited " + P.duration(waited);
  if (a.reason) s += "; reason: " + a.reason;
  if (a.grant_id) s += "; grant " + a.grant_id;
  return s;
}

function deliveryText(d) {
  let s = "delivery: " + d.state;
  if (d.status) s += " (HTTP " + d.status + ")";
  if (d.target) s += " to " + d.target;
  return s;
}

// ---- the page ----

const state = {
  tenant: "", job: "",
  timeline: null, // the last page read
  items: [], // every step shown, in order
  next: null, // the after= of the next page, null when all are shown
  seen: new Set(), // the runs begun
  retryItem: null,
  compare: 0, // the comparison under way (a newer one stops an older)
};

const $ = (id) => document.getElementById(id);
const el = (...a) => P.el(...a);

function timelinePath(job, after) {
  return "/v1/turn/" + encodeURIComponent(state.tenant) + "/" + encodeURIComponent(job) + "/timeline" +
    P.query({ after, limit: PAGE });
}

function turnProblem(err) {
  return err.status === 404 ? "Turn not found" + (err.message ? " (" + err.message + ")" : "") : err.message;
}

// ---- the header and the totals ----

function fact(label, value) {
  const d = el("span", "fact");
  d.append(el("span", "label", label + " "));
  if (value instanceof Node) d.append(value);
  else d.append(el("span", "", value));
  return d;
}

function renderHeader(tl) {
  const h = $("turn-header");
  const facts = el("div", "facts");
  const status = el("span", "state " + tl.status, tl.status);
  status.id = "status";
  facts.append(el("strong", "agent", tl.agent_id + "@" + tl.agent_version), fact("status", status));
  if (tl.channel) facts.append(fact("channel", tl.channel));
  if (tl.model) facts.append(fact("model", tl.model));
  facts.append(fact("started", P.time(tl.started_at)));
  if (tl.ended_at) facts.append(fact("ended", P.time(tl.ended_at)));
  if (tl.session_id) facts.append(fact("session", P.link(P.conversationHref(tl.session_id), tl.session_id)));
  if (tl.forked_from) {
    const f = tl.forked_from;
    facts.append(fact("forked from", P.link(P.turnHref(tl.tenant_id || state.tenant, f.job_id), f.job_id + " at step " + f.seq)));
  }
  const links = tl.links || {};
  if (links.web_ui) facts.append(P.external(links.web_ui, "Temporal Web UI", "web-ui"));
  if (links.trace) facts.append(P.external(links.trace, "trace", "trace"));
  const nodes = [el("h2", "", "Turn " + tl.job_id), facts];
  if (tl.error) nodes.push(el("p", "error", (tl.error.code ? tl.error.code + ": " : "") + tl.error.message));
  if (!(tl.runs || []).length) nodes.push(el("p", "note", "The turn's workflow runs could not be read (Temporal's visibility); its steps are shown."));
  h.replaceChildren(...nodes);
}

const TOTALS = [
  ["steps", "steps"], ["model_calls", "model calls"], ["tool_calls", "tool calls"], ["retries", "retries"],
  ["approvals", "approvals"], ["input_tokens", "input tokens"], ["output_tokens", "output tokens"],
  ["cached_tokens", "cached tokens"], ["reasoning_tokens", "reasoning tokens"], ["cost_usd", "cost"],
  ["duration_ms", "duration"],
];

function renderTotals(totals) {
  const box = $("totals");
  if (!box.firstChild) {
    for (const [key, label] of TOTALS) {
      const t = el("div", "total");
      const v = el("span", "value");
      v.dataset.total = key;
      t.append(v, el("span", "label", label));
      box.append(t);
    }
  }
  for (const [key] of TOTALS) {
    const n = box.querySelector('[data-total="' + key + '"]');
    const v = (totals || {})[key] || 0;
    n.textContent = key === "cost_usd" ? P.cost(v) : key === "duration_ms" ? P.duration(v) : String(v);
  }
}

// ---- the steps ----

function boundaryNode(run, tl) {
  const li = el("li", "run-boundary");
  li.dataset.run = String(run);
  const r = (tl.runs || [])[run];
  li.append(el("span", "", "Run " + (run + 1) + " — continued as new" + (r && r.run_id ? " · run " + r.run_id : "")));
  if (r && r.web_ui) li.append(" ", P.external(r.web_ui, "Web UI"));
  return li;
}

function barNode(item, tl) {
  const track = el("div", "track");
  const bar = el("div", "bar");
  bar.dataset.kind = item.kind;
  const g = geometry(item, tl.started_at, span(tl));
  bar.style.left = g.left + "%";
  bar.style.width = g.width + "%";
  bar.title = P.time(item.started_at) + " · " + P.duration(item.duration_ms);
  track.append(bar);
  return track;
}

function itemNode(item, tl) {
  const li = el("li", "item");
  li.dataset.seq = String(item.seq);
  li.dataset.kind = item.kind;
  li.dataset.run = String(item.run);
  const head = el("div", "item-head");
  head.append(el("span", "seq", "#" + item.seq), el("span", "kind", item.kind.replace("_", " ")),
    barNode(item, tl), el("span", "dur", P.duration(item.duration_ms)));
  // The step's activity is in its run's history in the Web UI.
  const run = (tl.runs || [])[item.run];
  if (run && run.web_ui) {
    const a = P.external(run.web_ui, "history");
    a.className = "item-web-ui";
    a.title = "run " + run.run_id + " in the Temporal Web UI";
    head.append(a);
  }
  li.append(head);
  if (item.kind === "model_call") modelCall(li, item);
  else if (item.kind === "tool_call") toolCall(li, item);
  else li.append(el("div", "text", item.text || ""));
  if (item.kind === "prompt" || item.kind === "tool_call") {
    const b = el("button", "retry", "Try again from here");
    b.type = "button";
    b.addEventListener("click", () => openRetry(item, li));
    li.append(b);
  }
  return li;
}

function modelCall(li, it) {
  const meta = el("div", "meta");
  if (it.model) meta.append(el("span", "model", it.model));
  meta.append(el("span", "tokens", tokensText(it)));
  if (it.cost_usd !== undefined && it.cost_usd !== null) meta.append(el("span", "cost", P.cost(it.cost_usd)));
  if (it.attempt) meta.append(el("span", "attempt", "attempt " + it.attempt));
  if (it.retries > 0) meta.append(el("span", "retries", "retried " + it.retries + "×"));
  li.append(meta);
  if (it.text) li.append(el("div", "text", it.text));
  if ((it.reasoning || []).length) {
    const d = el("details", "reasoning");
    d.append(el("summary", "", "Reasoning"), el("div", "", it.reasoning.join("\n\n")));
    li.append(d);
  }
  if ((it.calls || []).length) {
    const ul = el("ul", "asked");
    for (const c of it.calls) ul.append(el("li", "", c.name + " (" + c.call_id + ")"));
    li.append(el("div", "label", "asked for"), ul);
  }
  const r = it.request;
  if (r && r.whole_from > 0) {
    li.append(el("p", "note", "read the steps from #" + r.whole_from + " whole" +
      (r.digest_from > 0 && r.digest_from < r.whole_from ? ", #" + r.digest_from + "–#" + (r.whole_from - 1) + " as a digest" : "")));
  }
  const b = el("button", "request", "Request");
  b.type = "button";
  b.addEventListener("click", () => showRequest(li, it, b));
  li.append(b);
}

function toolCall(li, it) {
  const t = it.tool || {};
  if (t.error) li.classList.add("call-error");
  const meta = el("div", "meta");
  meta.append(el("span", "tool-name", t.name || ""));
  if (t.error) meta.append(el("span", "error", "error"));
  if (t.cache_hit) meta.append(el("span", "cache", "cache hit"));
  if (t.program) meta.append(el("span", "program", "from program " + t.program));
  li.append(meta);
  if (t.args !== undefined) li.append(el("div", "label", "arguments"), el("pre", "args", pretty(t.args)));
  li.append(el("div", "label", "result"), el("pre", "result" + (t.error ? " error" : ""), t.result || ""));
  if (t.result_clipped) li.append(el("p", "note clipped", "… clipped"));
  if (t.result_ref) li.append(el("p", "note result-ref", "whole result: " + t.result_ref));
  if (t.delivery) li.append(el("div", "delivery", deliveryText(t.delivery)));
  if (t.approval) li.append(el("div", "approval " + t.approval.outcome, approvalText(t.approval)));
}

// ---- the request a model call read ----

async function showRequest(li, it, button) {
  const had = li.querySelector("details.request");
  if (had) { had.open = !had.open; return; }
  button.disabled = true;
  try {
    const req = await P.api("GET", "/v1/turn/" + encodeURIComponent(state.tenant) + "/" +
      encodeURIComponent(state.job) + "/timeline/steps/" + it.seq + "/request");
    button.after(requestNode(req, it));
  } catch (err) {
    P.notice("The request of step " + it.seq + ": " + turnProblem(err));
  } finally {
    button.disabled = false;
  }
}

function requestNode(req, it) {
  const d = el("details", "request");
  d.open = true;
  d.append(el("summary", "", "Request of step #" + (req.seq !== undefined ? req.seq : it.seq) + (req.model ? " · " + req.model : "")));
  d.append(el("div", "label", "system prompt"));
  if (req.system_prompt_hidden) d.append(el("p", "note", "hidden (needs the admin role)"));
  else d.append(el("pre", "system", req.system_prompt || ""));
  d.append(el("div", "label", "tools offered"));
  const tools = el("ul", "tools");
  for (const t of req.tools || []) tools.append(el("li", "", t.name + (t.description ? " — " + t.description : "")));
  if (!(req.tools || []).length) tools.append(el("li", "note", "none"));
  d.append(tools);
  if (req.digest) {
    const r = it.request || {};
    d.append(el("div", "label", "digest" + (r.digest_from > 0 && r.whole_from > 0 ? " of steps #" + r.digest_from + "–#" + (r.whole_from - 1) : "") +
      ": the model read these steps as this summary"), el("pre", "digest", req.digest));
  }
  d.append(el("div", "label", "messages"));
  const ol = el("ol", "messages");
  for (const m of req.messages || []) ol.append(messageNode(m));
  d.append(ol);
  return d;
}

function messageNode(m) {
  const li = el("li", "message");
  li.dataset.role = m.role || "";
  let who = m.role || "";
  if (m.name) who += " " + m.name;
  if (m.tool_call_id) who += " (result of " + m.tool_call_id + ")";
  li.append(el("div", "role", who));
  const content = typeof m.content === "string" ? m.content : pretty(m.content);
  if (content) li.append(el("pre", "content", content));
  if (m.tool_calls && m.tool_calls.length) li.append(el("div", "label", "tool calls"), el("pre", "args", pretty(m.tool_calls)));
  return li;
}

// ---- loading ----

function append(tl) {
  const frag = document.createDocumentFragment();
  for (const e of layout(tl.items || [], state.seen)) {
    frag.append(e.item ? itemNode(e.item, tl) : boundaryNode(e.boundary, tl));
  }
  $("timeline").append(frag);
  state.items.push(...(tl.items || []));
}

async function load(first) {
  const more = $("load-more");
  more.disabled = true;
  try {
    const tl = await P.api("GET", timelinePath(state.job, first ? undefined : state.next));
    state.timeline = tl;
    state.next = tl.next_after === undefined ? null : tl.next_after;
    if (first) {
      closeRetry();
      $("timeline").replaceChildren();
      state.items = [];
      state.seen.clear();
      document.title = "turn " + tl.job_id + " · agentflow";
    }
    renderHeader(tl);
    renderTotals(tl.totals);
    append(tl);
    P.notice("");
  } catch (err) {
    P.notice(turnProblem(err));
  } finally {
    more.disabled = false;
    more.hidden = state.next === null;
  }
}

// everything reads a turn's whole timeline, page after page.
async function everything(job) {
  let tl = await P.api("GET", timelinePath(job));
  const items = [...(tl.items || [])];
  for (let pages = 1; tl.next_after !== undefined && tl.next_after !== null && pages < 100; pages++) {
    tl = await P.api("GET", timelinePath(job, tl.next_after));
    items.push(...(tl.items || []));
  }
  return { timeline: tl, items };
}

// ---- try again from here ----

function openRetry(item, li) {
  const f = $("retry-form");
  state.retryItem = item;
  $("retry-seq").textContent = "#" + item.seq;
  $("retry-prompt-row").hidden = item.kind !== "prompt";
  $("retry-prompt").value = item.kind === "prompt" ? item.text || (state.timeline && state.timeline.prompt) || "" : "";
  $("retry-result-row").hidden = item.kind !== "tool_call";
  $("retry-result").value = item.kind === "tool_call" && item.tool ? item.tool.result || "" : "";
  li.append(f);
  f.hidden = false;
  (item.kind === "prompt" ? $("retry-prompt") : item.kind === "tool_call" ? $("retry-result") : $("retry-model")).focus();
}

// closeRetry hides the form and puts it back out of the list, which a
// new load empties.
function closeRetry() {
  const f = $("retry-form");
  f.hidden = true;
  document.body.append(f);
  state.retryItem = null;
}

async function submitRetry(e) {
  if (e) e.preventDefault();
  const item = state.retryItem;
  if (!item) return;
  const body = retryBody(item, {
    prompt: $("retry-prompt").value, result: $("retry-result").value,
    model: $("retry-model").value, version: $("retry-version").value,
  });
  const b = $("retry-submit");
  b.disabled = true;
  try {
    const res = await P.api("POST", "/v1/turn/" + encodeURIComponent(state.tenant) + "/" + encodeURIComponent(state.job) + "/retry", body);
    closeRetry();
    compare(res.job_id);
  } catch (err) {
    P.notice("Try again: " + turnProblem(err));
  } finally {
    b.disabled = false;
  }
}

function sideNode(job, label) {
  const d = el("div", "side");
  d.dataset.job = job;
  d.append(el("h3", "", label + " " + job), el("p", "side-status", ""), el("div", "label", "answer"),
    el("div", "text answer-text", ""), el("div", "label", "tool calls"), el("ol", "calls"));
  return d;
}

function fillSide(node, status, s) {
  node.querySelector(".side-status").textContent = status;
  node.querySelector(".answer-text").textContent = s.answer;
  const ol = node.querySelector(".calls");
  ol.replaceChildren(...s.calls.map((c) => el("li", "", c.tool + " " + c.arguments)));
}

// compare shows the original turn beside the one tried again, reading
// the new one every second until it is no longer running (two minutes at
// most), with the diff of their answers and calls.
async function compare(newJob) {
  const id = ++state.compare;
  const box = $("compare");
  const link = $("retry-link");
  link.href = P.turnHref(state.tenant, newJob);
  link.textContent = "turn " + newJob;
  const orig = sideNode(state.job, "original");
  const next = sideNode(newJob, "tried again");
  box.querySelector(".sides").replaceChildren(orig, next);
  $("compare-diff").replaceChildren();
  box.hidden = false;
  box.scrollIntoView({ behavior: "smooth", block: "start" });
  let before;
  try {
    before = state.next === null ? { timeline: state.timeline, items: state.items } : await everything(state.job);
  } catch (err) {
    P.notice("The original turn: " + turnProblem(err));
    return;
  }
  const a = side(before.items);
  fillSide(orig, before.timeline.status, a);
  const until = Date.now() + POLL_FOR_MS;
  for (;;) {
    if (id !== state.compare) return;
    let status = "";
    try {
      const now = await everything(newJob);
      status = now.timeline.status;
      const b = side(now.items);
      fillSide(next, status, b);
      $("compare-diff").replaceChildren(D.diff(a, b));
    } catch (err) {
      if (err.status !== 404) { P.notice("The new turn: " + turnProblem(err)); return; }
      status = "running"; // not visible yet
    }
    $("compare-state").textContent = status;
    if (status !== "running") return;
    if (Date.now() > until) {
      P.notice("The new turn is still running after two minutes: the comparison stopped; its page shows the rest.");
      return;
    }
    await new Promise((r) => setTimeout(r, POLL_MS));
  }
}

// ---- start ----

async function start() {
  const [kind, tenant, job] = P.pathParams(location.pathname, "/");
  if (kind !== "turn" || !tenant || !job) {
    P.notice("Turn not found: the page is /turn/{tenant}/{job}.");
    return;
  }
  state.tenant = tenant;
  state.job = job;
  if (!(await P.signIn())) {
    P.notice("Type a bearer token and press Use token.");
    return;
  }
  await load(true);
}

if (typeof document !== "undefined") {
  document.addEventListener("DOMContentLoaded", () => {
    P.bindToken(start);
    $("load-more").addEventListener("click", () => load(false));
    $("retry-form").addEventListener("submit", submitRetry);
    $("retry-submit").addEventListener("click", submitRetry);
    $("retry-cancel").addEventListener("click", closeRetry);
    start();
  });
}
