"use strict";
// Inflates the embedded plotly.js and records, draws the charts, and opens a record's drill-down on click.
// Every string from a record is set as text (never as HTML), except code, which Pygments escaped and
// highlighted when the report was made. When everything is drawn, <body data-ready="1">.

async function inflate(id) {
  const b64 = document.getElementById(id).textContent.trim();
  const bin = atob(b64);
  const bytes = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
  const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
  return new Response(stream).text();
}

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
  for (const c of children) {
    if (c === null || c === undefined) continue;
    node.append(typeof c === "string" ? document.createTextNode(c) : c);
  }
  return node;
}

function fmt(v, digits = 2) {
  return v === null || v === undefined ? "—" : Number(v).toFixed(digits);
}

function dl(pairs) {
  const list = el("dl");
  for (const [k, v] of pairs) {
    if (v === null || v === undefined || v === "") continue;
    list.append(el("dt", {}, k), el("dd", {}, String(v)));
  }
  return list;
}

function capped(name, cap) {
  if (!cap || !cap.text) return [el("h3", {}, name), el("p", { class: "hint" }, "(empty)")];
  const note = cap.capped ? ` (first ${cap.text.length} of ${cap.total} characters)` : "";
  return [el("h3", {}, name + note), el("pre", {}, cap.text)];
}

function code(html) {
  const pre = el("pre", { class: "code" });
  pre.innerHTML = html; // Pygments output: escaped and highlighted in Python
  return pre;
}

function assertionsTable(assertions) {
  const body = el("tbody");
  for (const a of assertions) {
    body.append(el("tr", {},
      el("td", {}, String(a.index)),
      el("td", { class: "name" }, a.description || a.type),
      el("td", {}, a.type),
      el("td", {}, fmt(a.weight, 1) + (a.scored ? "" : " (unscored)")),
      el("td", {}, el("span", { class: a.passed ? "ok" : "bad" }, a.passed ? "passed" : "failed")),
      el("td", { class: "msg" }, a.message || "")));
  }
  return el("table", { class: "grid assertions" },
    el("thead", {}, el("tr", {}, ...["#", "assertion", "type", "weight", "result", "message"].map((h) => el("th", {}, h)))),
    body);
}

function staticTable(s) {
  const rows = [];
  for (const [kind, list] of [["required", s.required], ["forbidden", s.forbidden]]) {
    for (const p of list) {
      const good = kind === "required" ? p.matched : !p.matched;
      rows.push(el("tr", {},
        el("td", {}, kind),
        el("td", { class: "name" }, p.description || p.pattern),
        el("td", { class: "msg" }, p.pattern),
        el("td", {}, kind === "forbidden" ? p.severity : fmt(p.weight, 1)),
        el("td", {}, el("span", { class: good ? "ok" : "bad" }, p.matched ? "matched" : "not matched"))));
    }
  }
  return [
    el("p", {}, "syntax: ", el("span", { class: s.syntax_ok ? "ok" : "bad" }, s.syntax_ok ? "ok" : "error"),
      s.syntax_error ? " — " + s.syntax_error : ""),
    rows.length ? el("table", { class: "grid static" },
      el("thead", {}, el("tr", {}, ...["", "pattern", "regex", "weight/severity", "result"].map((h) => el("th", {}, h)))),
      el("tbody", {}, ...rows)) : el("p", { class: "hint" }, "no patterns"),
  ];
}

function drill(record) {
  const r = record;
  const body = document.getElementById("drill-body");
  body.replaceChildren();
  document.getElementById("drill-title").textContent = `${r.test_id} — ${r.model} (${r.variant})`;
  const sc = r.scores;
  body.append(
    dl([["run", r.run], ["item", r.item_id], ["category", r.category], ["difficulty", r.difficulty], ["type", r.type],
      ["status", r.status], ["reason", r.reason], ["grader duration", r.duration_ms + " ms"],
      ["infra retries", r.infra_retries || null], ["verdict", r.cached ? "from the verdict cache (graded by an earlier run)" : null],
      ["score", `correctness ${fmt(sc.correctness)} · execution pass ${sc.execution_pass ? "yes" : "no"} · runtime ${fmt(sc.runtime)} · static ${fmt(sc.static)} · static policy ${sc.static_policy_pass ? "pass" : "fail"}` + (sc.quality !== null && sc.quality !== undefined ? ` · judge quality ${fmt(sc.quality)}` : "")],
      ["excluded", r.counted ? null : "yes: " + (r.error || r.status)]]));
  body.append(el("h3", {}, "Prompt"), r.prompt ? el("pre", {}, r.prompt) : el("p", { class: "hint" }, "not available (see the note at the top)"));
  if (r.code_html) body.append(el("h3", {}, "Model code"), code(r.code_html));
  for (const f of r.files) body.append(el("h3", {}, "File " + f.name), code(f.html));
  if (r.raw) body.append(...capped(r.type === "knowledge" ? "Model output" : "Model output (no code extracted)", r.raw));
  if (r.answer) body.append(el("h3", {}, "Answer read from it"), el("pre", {}, r.answer));
  if (r.extraction_error) body.append(el("p", { class: "bad" }, "extraction: " + r.extraction_error));
  body.append(el("h3", {}, `Assertions (${r.assertions.filter((a) => a.passed).length} of ${r.assertions.length} passed)`));
  body.append(r.assertions.length ? assertionsTable(r.assertions) : el("p", { class: "hint" }, "none ran"));
  body.append(el("h3", {}, "Static checks"), ...(r.static ? staticTable(r.static) : [el("p", { class: "hint" }, "none")]));
  if (r.php_issues.length) {
    body.append(el("h3", {}, "PHP issues"), el("pre", {}, r.php_issues.map((i) => `${i.level}: ${i.message}${i.line ? " (line " + i.line + ")" : ""}`).join("\n")));
  }
  body.append(...capped("stdout", r.stdout), ...capped("stderr", r.stderr));
  const u = r.usage;
  body.append(el("h3", {}, "Usage"), dl([["tokens in / out", `${u.prompt_tokens} / ${u.completion_tokens}`],
    ["cost", "$" + fmt(u.cost_usd, 6)], ["latency", u.latency_ms + " ms"], ["calls", u.calls], ["retries", u.retries]]));
  if (r.judge) body.append(el("h3", {}, "Judge"), el("pre", {}, JSON.stringify(r.judge, null, 2)));
  const dialog = document.getElementById("drill");
  if (!dialog.open) dialog.showModal();
  dialog.scrollTop = 0;
}

function drawCharts() {
  for (const node of document.querySelectorAll("script.figure")) {
    const fig = JSON.parse(node.textContent);
    const div = document.getElementById(node.dataset.for);
    window.Plotly.newPlot(div, fig.data, fig.layout, { displaylogo: false, responsive: true });
  }
}

function wireTables(records) {
  for (const row of document.querySelectorAll("table.records tbody tr")) {
    row.addEventListener("click", () => drill(records[Number(row.dataset.index)]));
  }
  document.getElementById("drill-close").addEventListener("click", () => document.getElementById("drill").close());
  const filter = document.getElementById("filter");
  if (filter) {
    filter.addEventListener("input", () => {
      const q = filter.value.toLowerCase();
      for (const row of document.querySelectorAll("#records-table tbody tr")) {
        row.hidden = q !== "" && !row.textContent.toLowerCase().includes(q);
      }
    });
  }
}

async function main() {
  const [plotly, records] = await Promise.all([inflate("plotly-js"), inflate("records-data")]);
  const script = document.createElement("script");
  script.textContent = plotly;
  document.head.append(script);
  drawCharts();
  wireTables(JSON.parse(records));
  document.body.dataset.ready = "1";
}

main().catch((err) => {
  // e.g. a browser without DecompressionStream: the tables above still read; say why the charts are empty
  document.body.dataset.ready = "error";
  document.getElementById("charts").prepend(el("p", { class: "note" }, "The charts and drill-down could not load in this browser: " + err));
  console.error("report failed to load:", err);
});
