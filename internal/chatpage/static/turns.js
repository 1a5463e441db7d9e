// The agentflow list of recent turns, /turns: a client of the gateway's
// HTTP API (GET /v1/turns), filtered by agent, status, channel, start and
// cost, newest first, each row a link to its turn page. The filters are
// kept in the page's query, so a filtered list can be shared and reloaded.
// The token is the chat page's (page.js). Everything from the API is set
// as text.
"use strict";

const P = globalThis.agentflowPage;
const LIMIT = 50;

// FILTERS are the filter fields by their query parameter.
const FILTERS = { agent_id: "f-agent", status: "f-status", channel: "f-channel", since: "f-since", min_cost: "f-min-cost" };

// sinceRFC3339 is a datetime-local value (the tab's local time) as RFC
// 3339; "" when unset or unreadable.
function sinceRFC3339(local) {
  if (!local) return "";
  const d = new Date(local);
  return isNaN(d) ? "" : d.toISOString();
}

// localOf is the datetime-local value of an RFC 3339 time.
function localOf(rfc) {
  const d = new Date(rfc || "");
  if (isNaN(d)) return "";
  const p = (n) => String(n).padStart(2, "0");
  return d.getFullYear() + "-" + p(d.getMonth() + 1) + "-" + p(d.getDate()) + "T" + p(d.getHours()) + ":" + p(d.getMinutes());
}

// filters are the query parameters of the filters set.
function filters() {
  const $ = (id) => document.getElementById(id);
  return {
    agent_id: $("f-agent").value.trim(),
    status: $("f-status").value,
    channel: $("f-channel").value.trim(),
    since: sinceRFC3339($("f-since").value),
    min_cost: $("f-min-cost").value.trim(),
  };
}

function showFilters(q) {
  for (const [key, id] of Object.entries(FILTERS)) {
    const v = q.get(key) || "";
    document.getElementById(id).value = key === "since" ? localOf(v) : v;
  }
}

// current are the filters of the rows shown (those applied last); next
// the before= of the page after them.
let current = {};
let next = "";
let shown = 0;

function duration(t) {
  if (!t.started_at) return "";
  const end = t.ended_at ? Date.parse(t.ended_at) : NaN;
  return isNaN(end) ? "" : P.duration(end - Date.parse(t.started_at));
}

function row(t) {
  const tr = P.el("tr");
  tr.dataset.stream = t.stream_id || "";
  const td = (text, cls) => tr.append(P.el("td", cls, text));
  td(P.time(t.started_at));
  const href = P.streamHref(t.stream_id);
  const cell = P.el("td");
  cell.append(href ? P.link(href, t.job_id || t.stream_id, "turn-link") : P.el("span", "", t.job_id || t.stream_id));
  tr.append(cell);
  td((t.agent_id || "") + (t.agent_version ? "@" + t.agent_version : ""));
  td(t.status, "state " + (t.status || ""));
  td(t.channel || "");
  const prompt = P.el("td", "prompt-cell", t.prompt || "");
  prompt.title = t.prompt || "";
  tr.append(prompt);
  td(t.model_calls || 0, "num");
  td(t.tool_calls || 0, "num");
  td((t.input_tokens || 0) + " / " + (t.output_tokens || 0), "num");
  td(P.cost(t.cost_usd), "num");
  td(duration(t), "num");
  return tr;
}

async function load(more) {
  const btn = document.getElementById("more");
  const apply = document.getElementById("f-apply");
  btn.disabled = apply.disabled = true;
  const body = document.querySelector("#turns tbody");
  try {
    const res = await P.api("GET", "/v1/turns" + P.query(Object.assign({}, current, { limit: LIMIT, before: more ? next : "" })));
    if (!more) {
      body.replaceChildren();
      shown = 0;
    }
    const frag = document.createDocumentFragment();
    for (const t of res.turns || []) frag.append(row(t));
    body.append(frag);
    shown += (res.turns || []).length;
    next = res.next || "";
    P.notice("");
  } catch (err) {
    P.notice("Turns: " + err.message);
  } finally {
    btn.disabled = apply.disabled = false;
    btn.hidden = !next;
    document.getElementById("empty").hidden = shown > 0;
  }
}

function applyFilters() {
  current = filters();
  history.replaceState(null, "", location.pathname + P.query(current));
  next = "";
  load(false);
}

async function start() {
  if (!(await P.signIn())) {
    P.notice("Type a bearer token and press Use token.");
    return;
  }
  current = filters();
  load(false);
}

if (typeof document !== "undefined") {
  document.addEventListener("DOMContentLoaded", () => {
    showFilters(new URLSearchParams(location.search));
    P.bindToken(start);
    document.getElementById("f-apply").addEventListener("click", applyFilters);
    document.getElementById("more").addEventListener("click", () => load(true));
    for (const id of Object.values(FILTERS)) {
      document.getElementById(id).addEventListener("keydown", (e) => { if (e.key === "Enter") applyFilters(); });
    }
    start();
  });
}
