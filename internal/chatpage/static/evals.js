// The agentflow evaluation report page: a client of the gateway's HTTP
// API (GET /v1/evals/{eval_id}), showing an evaluation's totals per
// version, its cases, and for each replay of a recorded turn that differs
// from its recording a diff of the answers and the tool calls. The token
// is the chat page's (sessionStorage, this tab only), sent only as
// "Authorization: Bearer". Everything from the evaluation is set as text.
"use strict";

const TOKEN_KEY = "agentflow.token";
const $ = (id) => document.getElementById(id);

function el(tag, text, cls) {
  const e = document.createElement(tag);
  if (text !== undefined && text !== null) e.textContent = String(text);
  if (cls) e.className = cls;
  return e;
}

function notice(msg) {
  const n = $("notice");
  n.textContent = msg || "";
  n.hidden = !msg;
}

function table(head, rows) {
  const t = el("table");
  const tr = el("tr");
  head.forEach((h) => tr.appendChild(el("th", h)));
  t.appendChild(tr);
  rows.forEach((r) => {
    const row = el("tr");
    r.forEach((c) => {
      if (c instanceof Node) { const td = el("td"); td.appendChild(c); row.appendChild(td); return; }
      row.appendChild(el("td", c));
    });
    t.appendChild(row);
  });
  return t;
}

function verdict(ok) { const td = el("td", ok ? "pass" : "fail", ok ? "pass" : "fail"); return td; }

function pct(n, d) { return d ? Math.round((100 * n) / d) + "%" : "–"; }

// diff is the one the turn page uses too (diff.js, loaded first).
const diff = window.agentflowDiff.diff;

function render(run) {
  const root = $("report");
  root.replaceChildren();
  const versions = (run.versions || []).map((v) => "v" + v).join(", ");
  root.appendChild(el("p", `${run.eval_id}: dataset ${run.dataset}, agent ${run.agent_id} ${versions}; ${run.status}` +
    (run.status === "completed" ? (run.passed ? ", every case passed" : ", some cases failed") : ""), "summary"));

  root.appendChild(el("h2", "Totals"));
  root.appendChild(table(["version", "passed", "cases", "tokens", "cost (USD)", "latency p50 (ms)", "latency max (ms)"],
    (run.totals || []).map((t) => ["v" + t.version, pct(t.passed, t.cases), `${t.passed}/${t.cases}`, t.tokens,
      Number(t.cost_usd || 0).toFixed(4), t.latency_p50_ms, t.latency_max_ms])));

  const replayed = (run.totals || []).filter((t) => t.replay && t.replay.cases);
  if (replayed.length) {
    root.appendChild(el("h2", "Replay against the recordings"));
    root.appendChild(table(["version", "cases", "answers agree", "tool agreement", "divergences", "cost delta (USD)", "latency delta (ms)",
      "guardrail trips (recorded)"],
      replayed.map((t) => ["v" + t.version, t.replay.cases, `${t.replay.answers_agree}/${t.replay.cases}`,
        Math.round(100 * (t.replay.tool_agreement || 0)) + "%", t.replay.divergences,
        Number(t.replay.cost_delta_usd || 0).toFixed(4), t.replay.latency_delta_ms,
        `${t.replay.guard_trips} (${t.replay.recorded_guard_trips})`])));
  }

  root.appendChild(el("h2", "Cases"));
  const cases = run.cases || [];
  const t = table(["case", "version", "status", "result", "failed checks", "latency (ms)"], []);
  cases.forEach((c) => {
    const row = el("tr");
    [c.case_id, "v" + c.version, c.status].forEach((x) => row.appendChild(el("td", x)));
    row.appendChild(verdict(c.passed));
    row.appendChild(el("td", (c.checks || []).filter((k) => !k.passed).map((k) => k.name + (k.detail ? ": " + k.detail : "")).join("; ")));
    row.appendChild(el("td", c.latency_ms));
    t.appendChild(row);
  });
  root.appendChild(t);

  const differing = cases.filter((c) => c.replay && (!c.replay.answer_agrees || c.replay.divergences > 0 ||
    (c.replay.recorded_calls || []).length !== (c.replay.replayed_calls || []).length));
  if (differing.length) {
    root.appendChild(el("h2", "Replays that differ from their recording"));
    differing.forEach((c) => {
      root.appendChild(el("p", `${c.case_id} on v${c.version} (recorded turn ${c.replay.recorded_job_id}): ` +
        `${c.replay.matched} calls matched, ${c.replay.divergences} diverged`, "summary"));
      root.appendChild(diff({ answer: c.replay.recorded_answer, calls: c.replay.recorded_calls },
        { answer: c.output, calls: c.replay.replayed_calls }));
    });
  }
  if (run.report_markdown) {
    const d = el("details");
    d.appendChild(el("summary", "The report as Markdown"));
    d.appendChild(el("pre", run.report_markdown, "diff"));
    root.appendChild(d);
  }
}

async function show() {
  const token = $("token").value.trim() || sessionStorage.getItem(TOKEN_KEY) || "";
  const id = $("eval-id").value.trim();
  if (!token || !id) { notice("A token and an evaluation id are needed."); return; }
  sessionStorage.setItem(TOKEN_KEY, token);
  $("token").value = "";
  history.replaceState(null, "", "#" + encodeURIComponent(id));
  notice("");
  let resp;
  try {
    resp = await fetch("/v1/evals/" + encodeURIComponent(id), { headers: { Authorization: "Bearer " + token } });
  } catch (e) {
    notice("The gateway cannot be reached: " + e.message);
    return;
  }
  const body = await resp.json().catch(() => ({}));
  // Errors are problem details (RFC 9457): the detail says what is wrong.
  if (!resp.ok) { notice(body.detail || body.title || ("HTTP " + resp.status)); return; }
  render(body);
}

$("show").addEventListener("click", show);
$("eval-id").addEventListener("keydown", (e) => { if (e.key === "Enter") show(); });
if (location.hash.length > 1) {
  $("eval-id").value = decodeURIComponent(location.hash.slice(1));
  if (sessionStorage.getItem(TOKEN_KEY)) show();
}
