// What the turn page, the list of turns and the conversation page share:
// the chat page's token (sessionStorage "agentflow.token", this tab only,
// sent only as "Authorization: Bearer"; on a local stack the gateway's dev
// token when the tab holds none), the calls of the HTTP API, whose errors
// are problem details (RFC 9457), and how times, durations and costs read.
// Everything from the API is set as text.
"use strict";

(function (root) {
  const TOKEN_KEY = "agentflow.token";

  function token() {
    return sessionStorage.getItem(TOKEN_KEY) || "";
  }

  // signIn is the tab's token, else the dev token the gateway offers
  // (GET /chat/dev.json, found only on a local stack), which the tab then
  // keeps as the chat page does; "" when there is neither.
  async function signIn() {
    if (token()) return token();
    try {
      const resp = await fetch("/chat/dev.json", { cache: "no-store" });
      if (!resp.ok) return "";
      const d = await resp.json();
      if (d && typeof d.token === "string" && d.token) sessionStorage.setItem(TOKEN_KEY, d.token);
    } catch (e) {
      // No offer: the page asks for a token.
    }
    return token();
  }

  // bindToken wires the header's input#token and button#use-token: a
  // token typed replaces the tab's, and onChange loads the page again.
  function bindToken(onChange) {
    const input = document.getElementById("token");
    const use = () => {
      const t = input.value.trim();
      if (t) sessionStorage.setItem(TOKEN_KEY, t);
      else sessionStorage.removeItem(TOKEN_KEY);
      input.value = "";
      onChange();
    };
    document.getElementById("use-token").addEventListener("click", use);
    input.addEventListener("keydown", (e) => { if (e.key === "Enter") use(); });
  }

  // api calls the HTTP API; a failure throws an Error whose message is
  // the problem's detail and whose status is the HTTP status (0: the
  // gateway could not be reached).
  async function api(method, path, body) {
    const headers = { Authorization: "Bearer " + token(), Accept: "application/json" };
    const init = { method, headers };
    if (body !== undefined) {
      headers["Content-Type"] = "application/json";
      init.body = JSON.stringify(body);
    }
    let resp;
    try {
      resp = await fetch(path, init);
    } catch (e) {
      const err = new Error("the gateway cannot be reached: " + e.message);
      err.status = 0;
      throw err;
    }
    const data = await resp.json().catch(() => null);
    if (!resp.ok) {
      const err = new Error((data && (data.detail || data.title)) || resp.status + " " + resp.statusText);
      err.status = resp.status;
      throw err;
    }
    return data || {};
  }

  // query is a query string of the params that are set ("" and null
  // left out), with a leading "?" when there is any.
  function query(params) {
    const q = new URLSearchParams();
    for (const [k, v] of Object.entries(params)) {
      if (v !== undefined && v !== null && v !== "") q.set(k, String(v));
    }
    const s = q.toString();
    return s ? "?" + s : "";
  }

  function el(tag, cls, text) {
    const n = document.createElement(tag);
    if (cls) n.className = cls;
    if (text !== undefined && text !== null) n.textContent = String(text);
    return n;
  }

  function link(href, text, cls) {
    const a = el("a", cls, text);
    a.href = href;
    return a;
  }

  // external is a link to another site (the Temporal Web UI, a trace),
  // opened in a new tab that learns nothing of this one.
  function external(href, text, id) {
    const a = link(href, text);
    if (id) a.id = id;
    a.target = "_blank";
    a.rel = "noopener noreferrer";
    return a;
  }

  function notice(text) {
    const n = document.getElementById("notice");
    n.textContent = text || "";
    n.hidden = !text;
  }

  // turnHref is a turn's page: /turn/<tenant>/<job>, each escaped.
  function turnHref(tenant, job) {
    return "/turn/" + encodeURIComponent(tenant) + "/" + encodeURIComponent(job);
  }

  // streamHref is the page of the turn whose stream id is
  // turn/<tenant>/<job>; "" for another kind of stream.
  function streamHref(stream) {
    const m = /^turn\/([^/]+)\/(.+)$/.exec(stream || "");
    return m ? turnHref(m[1], m[2]) : "";
  }

  function conversationHref(session) {
    return "/conversations/" + encodeURIComponent(session);
  }

  // pathParams are the path's segments after prefix, unescaped: for
  // /turn/t1/job-7 and "/turn/", ["t1", "job-7"].
  function pathParams(pathname, prefix) {
    if (!pathname.startsWith(prefix)) return [];
    return pathname.slice(prefix.length).split("/").filter((s) => s !== "").map((s) => {
      try { return decodeURIComponent(s); } catch (e) { return s; }
    });
  }

  function time(iso) {
    if (!iso) return "";
    const d = new Date(iso);
    return isNaN(d) ? String(iso) : d.toLocaleString();
  }

  // duration reads milliseconds: 850 ms, 2.3 s, 1 min 5 s, 2 h 3 min.
  function duration(ms) {
    ms = Number(ms) || 0;
    if (ms < 1000) return Math.round(ms) + " ms";
    if (ms < 60000) return (ms / 1000).toFixed(ms < 10000 ? 2 : 1).replace(/\.?0+$/, "") + " s";
    const s = Math.round(ms / 1000);
    if (s < 3600) return Math.floor(s / 60) + " min " + (s % 60) + " s";
    return Math.floor(s / 3600) + " h " + Math.floor((s % 3600) / 60) + " min";
  }

  // cost reads US dollars with at least four decimals, and four
  // significant digits for what is less than a cent.
  function cost(usd) {
    const v = Number(usd) || 0;
    if (v <= 0) return "$" + (0).toFixed(4);
    const decimals = Math.min(10, Math.max(4, 3 - Math.floor(Math.log10(v))));
    return "$" + v.toFixed(decimals);
  }

  root.agentflowPage = {
    token, signIn, bindToken, api, query, el, link, external, notice,
    turnHref, streamHref, conversationHref, pathParams, time, duration, cost,
  };
})(globalThis);
