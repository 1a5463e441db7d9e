// The diff of two turns' answers and tool calls, shared by the pages that
// compare turns: the evaluation report (a replay against its recording)
// and the turn page (a turn tried again against the original). Each side
// is {answer, calls: [{tool, arguments}]}; the diff is a pre.diff whose
// lines are spans, "del" for the first side's, "add" for the second's.
// Everything is set as text.
"use strict";

(function (root) {
  // lines is the diff as data: [{cls, text}], cls "del", "add" or "".
  function lines(rec, rep) {
    const out = [];
    const line = (cls, text) => out.push({ cls, text });
    if (rec.answer !== rep.answer) {
      line("del", "- answer: " + rec.answer);
      line("add", "+ answer: " + rep.answer);
    }
    const calls = (cs) => (cs || []).map((c) => "call " + c.tool + " " + c.arguments);
    for (const op of sequence(calls(rec.calls), calls(rep.calls))) {
      line(op.cls, (op.cls === "del" ? "- " : op.cls === "add" ? "+ " : "  ") + op.text);
    }
    return out;
  }

  // maxLCS bounds the table of the longest common subsequence (a*b
  // cells); longer lists are compared position by position.
  const maxLCS = 4000000;

  // sequence is the edit script from a to b: the longest common
  // subsequence kept, so that a call left out or added shows as that one
  // line, not as every line after it.
  function sequence(a, b) {
    const out = [];
    if (a.length * b.length > maxLCS) {
      for (let i = 0; i < Math.max(a.length, b.length); i++) {
        if (a[i] === b[i]) { out.push({ cls: "", text: a[i] }); continue; }
        if (a[i] !== undefined) out.push({ cls: "del", text: a[i] });
        if (b[i] !== undefined) out.push({ cls: "add", text: b[i] });
      }
      return out;
    }
    // lcs[i][j]: the longest common subsequence of a[i:] and b[j:].
    const lcs = [];
    for (let i = 0; i <= a.length; i++) lcs.push(new Uint32Array(b.length + 1));
    for (let i = a.length - 1; i >= 0; i--) {
      for (let j = b.length - 1; j >= 0; j--) {
        lcs[i][j] = a[i] === b[j] ? lcs[i + 1][j + 1] + 1 : Math.max(lcs[i + 1][j], lcs[i][j + 1]);
      }
    }
    let i = 0, j = 0;
    while (i < a.length || j < b.length) {
      if (i < a.length && j < b.length && a[i] === b[j]) {
        out.push({ cls: "", text: a[i] }); i++; j++;
      } else if (j >= b.length || (i < a.length && lcs[i + 1][j] >= lcs[i][j + 1])) {
        out.push({ cls: "del", text: a[i] }); i++;
      } else {
        out.push({ cls: "add", text: b[j] }); j++;
      }
    }
    return out;
  }

  // diff is the diff as a pre.diff element.
  function diff(rec, rep) {
    const pre = document.createElement("pre");
    pre.className = "diff";
    for (const l of lines(rec, rep)) {
      const s = document.createElement("span");
      if (l.cls) s.className = l.cls;
      s.textContent = l.text + "\n";
      pre.appendChild(s);
    }
    return pre;
  }

  root.agentflowDiff = { diff, lines };
})(globalThis);
