// The agentflow conversation page, /conversations/{session}: a client of
// the gateway's HTTP API showing a session's transcript and memory (GET
// /v1/conversations/{session}/transcript, proto Transcript in its JSON
// names, snake_case), its turns (GET /v1/turns?session_id=), each a link
// to its turn page, and the sessions forked from it (GET
// /v1/conversations/{session}/forks). The token is the chat page's
// (page.js). Everything from the API is set as text.
"use strict";

const P = globalThis.agentflowPage;
const $ = (id) => document.getElementById(id);

let session = "";
let tenant = ""; // from the transcript's conversation id, conv/<tenant>/<session>

function tenantOf(conversationID) {
  const m = /^conv\/([^/]+)\//.exec(conversationID || "");
  return m ? m[1] : "";
}

function turnLink(stream, job) {
  const href = P.streamHref(stream) || (tenant && job ? P.turnHref(tenant, job) : "");
  return href ? P.link(href, "see the turn " + (job || ""), "turn-link") : P.el("span", "note", job || "");
}

function renderTranscript(t) {
  tenant = tenantOf(t.conversation_id);
  const head = $("conversation-header");
  head.replaceChildren(P.el("h2", "", "Conversation " + (t.session_id || session)),
    P.el("p", "note", (t.turns || 0) + " turns answered" + (Number(t.runs) ? ", continued as new " + (Number(t.runs) === 1 ? "once" : t.runs + " times") : "")));
  const hasSummary = !!t.summary, hasDigest = !!t.digest;
  $("memory").hidden = !hasSummary && !hasDigest;
  $("summary-block").hidden = !hasSummary;
  $("summary").textContent = t.summary || "";
  $("summary-note").textContent = "The summary the model reads before the latest messages" +
    (Number(t.summary_seq) ? ", of the messages up to " + t.summary_seq : "");
  $("digest-block").hidden = !hasDigest;
  $("digest").textContent = t.digest || "";
  const frag = document.createDocumentFragment();
  for (const e of t.entries || []) {
    const li = P.el("li", "entry");
    li.dataset.stream = e.stream_id || "";
    li.append(P.el("div", "prompt", e.prompt || ""), P.el("div", "text", e.output || ""));
    const foot = P.el("div", "note");
    foot.append(P.el("span", "state " + (e.status || ""), e.status || ""), " ", turnLink(e.stream_id, e.job_id));
    li.append(foot);
    frag.append(li);
  }
  $("transcript").replaceChildren(frag);
  $("pending").replaceChildren(...(t.pending || []).map((p) => {
    const li = P.el("li", "entry pending");
    li.append(P.el("div", "prompt", p.prompt || ""), P.el("p", "note", "waiting for its turn"), turnLink(p.stream_id, p.job_id));
    return li;
  }));
}

function renderTurns(res) {
  const frag = document.createDocumentFragment();
  for (const t of res.turns || []) {
    const tr = P.el("tr");
    tr.dataset.stream = t.stream_id || "";
    const cell = P.el("td");
    const href = P.streamHref(t.stream_id);
    cell.append(href ? P.link(href, t.job_id || t.stream_id, "turn-link") : P.el("span", "", t.job_id || ""));
    tr.append(P.el("td", "", P.time(t.started_at)), cell,
      P.el("td", "", (t.agent_id || "") + (t.agent_version ? "@" + t.agent_version : "")),
      P.el("td", "state " + (t.status || ""), t.status || ""), P.el("td", "prompt-cell", t.prompt || ""),
      P.el("td", "num", (t.input_tokens || 0) + " / " + (t.output_tokens || 0)), P.el("td", "num", P.cost(t.cost_usd)));
    frag.append(tr);
  }
  document.querySelector("#session-turns tbody").replaceChildren(frag);
}

function renderForks(res) {
  const forks = res.forks || [];
  if (!forks.length) {
    $("forks").replaceChildren(P.el("li", "note", "none"));
    return;
  }
  $("forks").replaceChildren(...forks.map((f) => {
    const li = P.el("li", "fork");
    li.dataset.session = f.session_id || "";
    li.append(P.link(P.conversationHref(f.session_id), f.session_id), " forked at ");
    li.append(tenant && f.forked_at_job ? P.link(P.turnHref(tenant, f.forked_at_job), f.forked_at_job, "turn-link") : P.el("span", "", f.forked_at_job || ""));
    if (f.created_at) li.append(", " + P.time(f.created_at));
    return li;
  }));
}

async function part(name, path, render) {
  try {
    render(await P.api("GET", path));
    return "";
  } catch (err) {
    return err.status === 404 && name === "transcript" ? "Conversation not found" + (err.message ? " (" + err.message + ")" : "")
      : name + ": " + err.message;
  }
}

async function start() {
  const [kind, s] = P.pathParams(location.pathname, "/");
  if (kind !== "conversations" || !s) {
    P.notice("Conversation not found: the page is /conversations/{session}.");
    return;
  }
  session = s;
  document.title = "conversation " + session + " · agentflow";
  if (!(await P.signIn())) {
    P.notice("Type a bearer token and press Use token.");
    return;
  }
  const base = "/v1/conversations/" + encodeURIComponent(session);
  // The transcript first: the forks' links need its tenant.
  const problems = [await part("transcript", base + "/transcript", renderTranscript)];
  problems.push(...await Promise.all([
    part("turns", "/v1/turns" + P.query({ session_id: session, limit: 200 }), renderTurns),
    part("forks", base + "/forks", renderForks),
  ]));
  P.notice(problems.filter(Boolean).join("; "));
}

if (typeof document !== "undefined") {
  document.addEventListener("DOMContentLoaded", () => {
    P.bindToken(start);
    start();
  });
}
