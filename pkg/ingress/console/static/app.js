// The searchfleet console: a single page over the fleet's public JSON API.
//
// Rules this file keeps: text from the API (questions, answers, titles, URLs, errors)
// enters the page only as text nodes (h() below; never innerHTML), and a link is made
// only of an http(s) URL (safeHref). The key stays in this tab's sessionStorage and
// goes out only as an Authorization header to this origin.

const KEY = "searchfleet.key";
let apiKey = sessionStorage.getItem(KEY) || "";
let openAPI = false;
let models = null;

// ---- DOM ------------------------------------------------------------------------

// h builds an element: attrs are properties for on* handlers, "class", "dataset",
// "href" (checked by safeHref) and attributes otherwise; children are nodes, text
// (strings and numbers become text nodes), arrays or null.
function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else if (k === "class") el.className = v;
    else if (k === "dataset") Object.assign(el.dataset, v);
    else if (k === "href") { const u = safeHref(v); if (u) el.setAttribute("href", u); }
    else el.setAttribute(k, v === true ? "" : String(v));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

// safeHref returns url if it is a same-origin fragment or an absolute http(s) URL, else null.
function safeHref(url) {
  if (typeof url !== "string") return null;
  if (url.startsWith("#/")) return url;
  try {
    const u = new URL(url);
    return u.protocol === "http:" || u.protocol === "https:" ? u.href : null;
  } catch {
    return null;
  }
}

// extLink is a link to a page on the web (a source), or plain text when url is not http(s).
function extLink(url, text, attrs = {}) {
  if (!safeHref(url)) return h("span", { class: attrs.class }, text);
  return h("a", { ...attrs, href: url, target: "_blank", rel: "noopener noreferrer nofollow" }, text);
}

const $ = (sel) => document.querySelector(sel);
const usd = (n) => "$" + (Number(n) || 0).toFixed(4);
const when = (sec) => (sec ? new Date(sec * 1000).toLocaleString() : "—");
const badge = (status) => h("span", { class: "badge " + status, dataset: { status } }, status);
const terminalJob = (s) => s === "completed" || s === "failed" || s === "cancelled";
const terminalBatch = (s) => ["completed", "failed", "expired", "cancelled"].includes(s);

// ---- API ------------------------------------------------------------------------

function headers(json) {
  const hd = {};
  if (apiKey) hd.Authorization = "Bearer " + apiKey;
  if (json) hd["Content-Type"] = "application/json";
  return hd;
}

async function api(method, path, body) {
  const r = await fetch(path, { method, headers: headers(body !== undefined), body: body === undefined ? undefined : JSON.stringify(body) });
  let data = null;
  const text = await r.text();
  try { data = JSON.parse(text); } catch { data = text; }
  if (r.status === 401 && !openAPI) {
    signOut("Your key was not accepted; sign in again.");
    throw new Error("unauthorized");
  }
  if (!r.ok) throw new Error((data && data.error && data.error.message) || `HTTP ${r.status}`);
  return data;
}

// sse reads server-sent events over fetch (EventSource cannot send the key) and calls
// onEvent(type, data) for each, until the stream ends or signal aborts.
async function sse(path, onEvent, signal) {
  const r = await fetch(path, { headers: headers(false), signal });
  if (!r.ok) throw new Error(`HTTP ${r.status}`);
  const reader = r.body.pipeThrough(new TextDecoderStream()).getReader();
  let buf = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buf += value.replace(/\r\n/g, "\n");
    let i;
    while ((i = buf.indexOf("\n\n")) >= 0) {
      const block = buf.slice(0, i);
      buf = buf.slice(i + 2);
      let type = "message";
      const data = [];
      for (const line of block.split("\n")) {
        if (line === "" || line.startsWith(":")) continue;
        const c = line.indexOf(":");
        const field = c < 0 ? line : line.slice(0, c);
        const v = c < 0 ? "" : line.slice(c + 1).replace(/^ /, "");
        if (field === "event") type = v;
        else if (field === "data") data.push(v);
      }
      if (data.length) onEvent(type, data.join("\n"));
    }
  }
}

async function modelNames() {
  if (!models) models = (await api("GET", "/v1/models")).data.map((m) => m.id);
  return models;
}

// ---- pages ------------------------------------------------------------------------

// page holds what the current page started (timers, streams); leaving it stops them.
let page = { ctl: new AbortController(), timers: [] };

function leave() {
  page.ctl.abort();
  page.timers.forEach(clearInterval);
  page = { ctl: new AbortController(), timers: [] };
}

function every(pg, ms, fn) {
  if (pg !== page) return;
  pg.timers.push(setInterval(() => fn().catch(() => {}), ms));
}

// show replaces the page's content, unless the user has moved on to another page
// since pg started (its late answer must not cover the new page).
function show(pg, ...children) {
  if (pg !== page) return;
  const main = $("#main");
  main.replaceChildren();
  append(main, children);
}

function failure(err) {
  if (String(err && err.message) === "unauthorized") return;
  show(page, h("p", { class: "error", id: "page-error" }, "Error: " + (err && err.message)));
}

async function route() {
  leave();
  const [, name, id] = (location.hash || "#/jobs").split("/");
  if (!apiKey && !openAPI) return login();
  $("#nav").hidden = false;
  $("#logout").hidden = openAPI;
  $("#who").textContent = openAPI ? "open API (no tenants configured)" : "signed in with key …" + apiKey.slice(-4);
  for (const a of document.querySelectorAll("#nav a")) a.classList.toggle("active", a.dataset.page === name);
  const pages = { jobs: id ? () => jobPage(decodeURIComponent(id)) : jobsPage, batches: id ? () => batchPage(decodeURIComponent(id)) : batchesPage,
    research: id ? () => runPage(decodeURIComponent(id)) : researchPage, spend: spendPage, engines: enginesPage };
  const pg = page;
  try {
    await (pages[name] || jobsPage)();
  } catch (err) {
    if (pg === page) failure(err);
  }
}

function signOut(message) {
  apiKey = "";
  sessionStorage.removeItem(KEY);
  login(message);
}

function login(message) {
  leave();
  $("#nav").hidden = true;
  $("#logout").hidden = true;
  $("#who").textContent = "";
  const input = h("input", { type: "password", id: "key", placeholder: "sk-…", autocomplete: "off", required: true });
  const err = h("p", { class: "error", id: "login-error" }, message || "");
  const form = h("form", { id: "login", class: "inline", onsubmit: async (e) => {
    e.preventDefault();
    const k = input.value.trim();
    const r = await fetch("/v1/jobs?limit=1", { headers: { Authorization: "Bearer " + k } });
    if (!r.ok) { err.textContent = r.status === 401 ? "That key was not accepted." : `The fleet answered ${r.status}.`; return; }
    apiKey = k;
    sessionStorage.setItem(KEY, k);
    if (!location.hash.startsWith("#/") || location.hash === "#/login") location.hash = "#/jobs";
    route();
  } }, input, h("button", { type: "submit", id: "login-submit" }, "Sign in"));
  show(page, h("div", { class: "card login" },
    h("h1", {}, "Sign in"),
    h("p", { class: "muted" }, "Use your tenant API key. It is kept in this tab only (sessionStorage) and sent to this fleet's API."),
    form, err));
}

// ---- jobs ------------------------------------------------------------------------------

async function jobsPage() {
  const pg = page;
  const names = await modelNames();
  const select = h("select", { id: "model" }, names.map((m) => h("option", { value: m }, m)));
  const question = h("textarea", { id: "question", placeholder: "Ask something that needs the web…", required: true });
  const status = h("span", { class: "error", id: "submit-error" });
  const form = h("form", { id: "new-job", onsubmit: async (e) => {
    e.preventDefault();
    try {
      const job = await api("POST", "/v1/jobs", { model: select.value, messages: [{ role: "user", content: question.value }] });
      location.hash = "#/jobs/" + encodeURIComponent(job.id);
    } catch (err) { status.textContent = err.message; }
  } }, question, h("div", { class: "row" }, select, h("button", { type: "submit", id: "submit-job" }, "Submit job"), status));
  const body = h("tbody", { id: "jobs" });
  show(pg, 
    h("h1", {}, "Jobs"),
    h("div", { class: "card" }, h("h2", { style: null }, "New job"), form),
    h("table", {}, h("thead", {}, h("tr", {}, ["Job", "Status", "Question", "Model", "Searches", "Cost", "Created"].map((c, i) => h("th", { class: i === 4 || i === 5 ? "num" : null }, c)))), body),
  );
  const load = async () => {
    const list = await api("GET", "/v1/jobs?limit=50");
    body.replaceChildren(...list.data.map((j) => h("tr", { dataset: { id: j.id } },
      h("td", {}, h("a", { class: "mono", href: "#/jobs/" + encodeURIComponent(j.id) }, j.id)),
      h("td", {}, badge(j.status)),
      h("td", { class: "question" }, j.question || "", j.replay_of ? h("span", { class: "muted" }, " (replay)") : null),
      h("td", {}, j.model || j.kind),
      h("td", { class: "num" }, j.searches),
      h("td", { class: "num" }, usd(j.cost_usd)),
      h("td", { class: "muted" }, when(j.created_at)))));
    if (!list.data.length) body.append(h("tr", {}, h("td", { colspan: 7, class: "muted" }, "No jobs yet.")));
  };
  await load();
  every(pg, 2000, load);
}

// answerOf reads the answer text out of a job's response in any client protocol.
function answerOf(resp) {
  if (!resp) return "";
  if (Array.isArray(resp.choices)) return (resp.choices[0] && resp.choices[0].message && resp.choices[0].message.content) || "";
  if (Array.isArray(resp.output)) return resp.output.filter((o) => o.type === "message").flatMap((o) => o.content || []).filter((c) => c.type === "output_text").map((c) => c.text).join("");
  if (Array.isArray(resp.content)) return resp.content.filter((c) => c.type === "text").map((c) => c.text).join("");
  return "";
}

// sourcesOf is the answer's numbered sources: [n] cites sources[n-1].
function sourcesOf(job) {
  const sf = job.response && job.response.searchfleet;
  if (sf && Array.isArray(sf.sources)) return sf.sources.map((s) => ({ title: s.title, url: s.url }));
  return (job.trace || []).flatMap((t) => (t.sources || []).map((s) => (typeof s === "string" ? { url: s, title: s } : s)));
}

// answerNodes renders text with each [n] marker linked to its source.
function answerNodes(text, sources) {
  const out = [];
  let last = 0;
  for (const m of text.matchAll(/\[(\d+)\]/g)) {
    out.push(text.slice(last, m.index));
    const n = Number(m[1]);
    const src = sources[n - 1];
    if (src && safeHref(src.url)) out.push(extLink(src.url, `[${n}]`, { class: "cite", title: src.title || src.url, "data-n": n }));
    else out.push(h("span", { class: "cite-missing" }, m[0]));
    last = m.index + m[0].length;
  }
  out.push(text.slice(last));
  return out;
}

function stat(label, value, id) {
  return h("div", { class: "stat" }, h("div", { class: "label" }, label), h("div", { class: "value", id }, value));
}

async function jobPage(id) {
  const pg = page;
  const events = h("ul", { class: "events mono", id: "events" });
  const content = h("div", { id: "job" });
  show(pg, content, h("div", { class: "card" }, h("h2", {}, "Events"), events));
  let job = await api("GET", "/v1/jobs/" + encodeURIComponent(id));
  const req = await api("GET", "/v1/jobs/" + encodeURIComponent(id) + "/request").catch(() => null);
  const render = () => content.replaceChildren(jobView(job, req));
  render();
  // The event stream replays the job's events from its start, then follows it live.
  {
    const ctl = pg.ctl;
    sse("/v1/jobs/" + encodeURIComponent(id) + "/events", async (type, data) => {
      let ev = {};
      try { ev = JSON.parse(data); } catch {}
      if (type === "delta") return;
      events.append(h("li", {}, `${new Date(ev.at || Date.now()).toLocaleTimeString()}  ${type}`, ev.hop !== undefined ? `  hop ${ev.hop}` : "", ev.engine ? `  ${ev.engine}` : "", ev.error ? `  ${ev.error}` : ""));
      if (!terminalJob(job.status) && ["completed", "failed", "cancelled", "model_call", "search_done"].includes(type)) {
        job = await api("GET", "/v1/jobs/" + encodeURIComponent(id));
        if (!ctl.signal.aborted) render();
      }
    }, ctl.signal).catch(() => {});
    // The event stream may end without a terminal event (a deadline): poll as well.
    every(pg, 3000, async () => {
      if (terminalJob(job.status)) return;
      job = await api("GET", "/v1/jobs/" + encodeURIComponent(id));
      render();
    });
  }
}

function jobView(job, req) {
  const u = job.usage || {};
  const sources = sourcesOf(job);
  const text = answerOf(job.response);
  const replayErr = h("span", { class: "error", id: "replay-error" });
  const replay = h("button", { type: "button", id: "replay", class: "secondary", disabled: !(terminalJob(job.status) && job.kind === "chat"),
    title: "A new job with this request, its searches answered from this job's recorded results (none is paid again)",
    onclick: async () => {
      try {
        const j = await api("POST", "/v1/jobs/" + encodeURIComponent(job.id) + "/replay");
        location.hash = "#/jobs/" + encodeURIComponent(j.id);
      } catch (err) { replayErr.textContent = err.message; }
    } }, "Replay");
  const duration = job.finished_at ? `${job.finished_at - job.created_at} s` : "—";
  return h("div", {},
    h("div", { class: "row" }, h("h1", { class: "mono" }, job.id), h("span", { id: "status" }, badge(job.status)), replay, replayErr),
    job.replay_of ? h("p", {}, "Replay of ", h("a", { class: "mono", href: "#/jobs/" + encodeURIComponent(job.replay_of), id: "replay-of" }, job.replay_of)) : null,
    job.trace_url ? h("p", {}, "Trace ", h("a", { class: "mono", href: job.trace_url, target: "_blank", rel: "noopener", id: "trace-link" }, job.trace_id)) : null,
    job.batch_id ? h("p", {}, "Line of batch ", h("a", { class: "mono", href: "#/batches/" + encodeURIComponent(job.batch_id) }, job.batch_id)) : null,
    h("div", { class: "card grid" },
      stat("Model", job.model || job.kind),
      stat("Created", when(job.created_at)),
      stat("Took", duration),
      stat("Searches", u.searches ?? 0, "searches"),
      stat("Model calls", u.model_calls ?? "—"),
      stat("Cost", usd(u.cost_usd), "cost"),
      stat("Search / model cost", `${usd(u.search_cost_usd)} / ${usd(u.model_cost_usd)}`),
      stat("Tokens in / out", `${u.prompt_tokens ?? 0} / ${u.completion_tokens ?? 0}`),
      u.citations ? stat("Citations valid / removed", `${u.citations.valid} / ${u.citations.removed}`, "citations") : null),
    req ? h("div", { class: "card" }, h("h2", {}, "Question"), h("p", { class: "answer", id: "question-text" }, req.question || "—"),
      h("details", {}, h("summary", { class: "muted" }, "Request"), h("pre", { class: "mono" }, JSON.stringify(req.request, null, 2)))) : null,
    job.error ? h("div", { class: "card error", id: "job-error" }, `${job.error.type}: ${job.error.message}`) : null,
    h("div", { class: "card" }, h("h2", {}, "Answer"),
      text ? h("div", { class: "answer", id: "answer" }, answerNodes(text, sources))
        : h("p", { class: "muted", id: "answer" }, terminalJob(job.status) ? "No answer." : "Working…")),
    h("div", { class: "card" }, h("h2", {}, "Sources"),
      sources.length ? h("ol", { class: "sources", id: "sources" }, sources.map((s, i) => h("li", { dataset: { n: i + 1 } },
        extLink(s.url, s.title || s.url, { class: "title" }), " ", h("span", { class: "muted mono" }, s.url))))
        : h("p", { class: "muted" }, "None.")),
    h("div", { class: "card" }, h("h2", {}, "Search trace"), traceTable(job.trace || [])),
  );
}

function traceTable(trace) {
  if (!trace.length) return h("p", { class: "muted", id: "trace" }, "No searches.");
  return h("table", { class: "trace", id: "trace" },
    h("thead", {}, h("tr", {}, ["Hop", "Tool / engine", "Query", "Sources", "ms", "Result"].map((c) => h("th", {}, c)))),
    h("tbody", {}, trace.map((t) => h("tr", {},
      h("td", {}, t.hop),
      h("td", { class: "engine" }, t.tool || "web_search", t.engine ? [" · ", h("b", {}, t.engine)] : null, t.engine_choice ? h("div", { class: "muted" }, t.engine_choice) : null),
      h("td", { class: "query" }, t.query || t.url || ""),
      h("td", {}, h("ol", {}, (t.sources || []).map((s) => (typeof s === "string" ? { url: s, title: s } : s)).map((s) => h("li", {}, extLink(s.url, s.title || s.url))))),
      h("td", { class: "num" }, t.ms ?? ""),
      h("td", { class: t.error ? "error" : "muted" }, t.error || `${(t.sources || []).length} sources${t.attempts > 1 ? `, ${t.attempts} attempts` : ""}`)))));
}

// ---- batches ------------------------------------------------------------------------

function bar(done, failed) {
  const d = h("div", {});
  d.style.width = done + "%";
  d.style.display = "inline-block";
  const f = h("div", { class: "failed" });
  f.style.width = failed + "%";
  f.style.display = "inline-block";
  const p = h("div", { class: "progress" }, d, f);
  p.style.whiteSpace = "nowrap";
  p.style.fontSize = "0";
  return p;
}

async function batchesPage() {
  const pg = page;
  const names = await modelNames();
  const select = h("select", { id: "batch-model" }, names.map((m) => h("option", { value: m }, m)));
  const queries = h("textarea", { id: "queries", placeholder: "One question per line", required: true });
  const status = h("span", { class: "error", id: "batch-error" });
  const form = h("form", { id: "new-batch", onsubmit: async (e) => {
    e.preventDefault();
    const qs = queries.value.split("\n").map((q) => q.trim()).filter(Boolean);
    try {
      const b = await api("POST", "/v1/batches", { model: select.value, queries: qs });
      location.hash = "#/batches/" + encodeURIComponent(b.id);
    } catch (err) { status.textContent = err.message; }
  } }, queries, h("div", { class: "row" }, select, h("button", { type: "submit", id: "submit-batch" }, "Start batch"), status));
  const body = h("tbody", { id: "batches" });
  show(pg, h("h1", {}, "Batches"), h("div", { class: "card" }, h("h2", {}, "New batch"), form),
    h("table", {}, h("thead", {}, h("tr", {}, ["Batch", "Status", "Progress", "Done", "Failed", "Created"].map((c) => h("th", {}, c)))), body));
  const load = async () => {
    const list = await api("GET", "/v1/batches?limit=50");
    body.replaceChildren(...list.data.map((b) => h("tr", { dataset: { id: b.id } },
      h("td", {}, h("a", { class: "mono", href: "#/batches/" + encodeURIComponent(b.id) }, b.id)),
      h("td", {}, badge(b.status)),
      h("td", {}, bar(pct(b, "completed"), pct(b, "failed"))),
      h("td", { class: "num" }, `${b.request_counts.completed} / ${b.request_counts.total}`),
      h("td", { class: "num" }, b.request_counts.failed),
      h("td", { class: "muted" }, when(b.created_at)))));
    if (!list.data.length) body.append(h("tr", {}, h("td", { colspan: 6, class: "muted" }, "No batches yet.")));
  };
  await load();
  every(pg, 3000, load);
}

const pct = (b, k) => (b.request_counts.total ? (100 * b.request_counts[k]) / b.request_counts.total : 0);

async function batchPage(id) {
  const pg = page;
  const head = h("div", {});
  const updates = h("span", { class: "muted", id: "batch-updates" }, "0 updates");
  const output = h("div", { id: "output" });
  show(pg, head, h("p", {}, updates), output);
  let n = 0;
  let shown = false;
  const render = (b) => {
    head.replaceChildren(
      h("div", { class: "row" }, h("h1", { class: "mono" }, b.id), h("span", { id: "batch-status" }, badge(b.status))),
      h("div", { class: "card" },
        h("div", { class: "row" }, bar(pct(b, "completed"), pct(b, "failed")),
          h("span", { id: "batch-counts" }, `${b.request_counts.completed} / ${b.request_counts.total} completed, ${b.request_counts.failed} failed`)),
        h("div", { class: "grid" }, stat("Model", b.model || "—"), stat("Created", when(b.created_at)), stat("Completed at", when(b.completed_at)))));
    if (b.output_file_id && terminalBatch(b.status) && !shown) {
      shown = true;
      showOutput(b.output_file_id, output).catch((err) => output.replaceChildren(h("p", { class: "error" }, err.message)));
    }
  };
  render(await api("GET", "/v1/batches/" + encodeURIComponent(id)));
  await sse("/v1/batches/" + encodeURIComponent(id) + "/events", (type, data) => {
    if (type !== "batch") return;
    n++;
    updates.textContent = `${n} live update${n === 1 ? "" : "s"}`;
    render(JSON.parse(data));
  }, pg.ctl.signal).catch(() => {});
}

// showOutput lists a finished batch's output lines, each linked to its job's trace.
async function showOutput(fileID, into) {
  const r = await fetch("/v1/files/" + encodeURIComponent(fileID) + "/content", { headers: headers(false) });
  if (!r.ok) throw new Error(`output file: HTTP ${r.status}`);
  const lines = (await r.text()).split("\n").filter(Boolean).slice(0, 200).map((l) => { try { return JSON.parse(l); } catch { return null; } }).filter(Boolean);
  into.replaceChildren(h("div", { class: "card" }, h("h2", {}, "Output"), h("table", { id: "output-lines" },
    h("thead", {}, h("tr", {}, ["custom_id", "Job", "Status", "Answer"].map((c) => h("th", {}, c)))),
    h("tbody", {}, lines.map((l) => {
      const body = (l.response && l.response.body) || {};
      const job = (body.searchfleet && body.searchfleet.job_id) || "";
      const text = answerOf(body);
      return h("tr", {},
        h("td", { class: "mono" }, l.custom_id || ""),
        h("td", {}, job ? h("a", { class: "mono", href: "#/jobs/" + encodeURIComponent(job) }, job) : "—"),
        h("td", {}, l.response ? l.response.status_code : (l.error && l.error.message) || ""),
        h("td", {}, text.length > 160 ? text.slice(0, 160) + "…" : text));
    })))));
}

// ---- spend and engines ------------------------------------------------------------------

// ---- research runs -----------------------------------------------------------------

async function researchPage() {
  const pg = page;
  const input = h("input", { type: "text", id: "run-question", placeholder: "A question to research…", required: true });
  const effort = h("select", { id: "run-effort" }, ["low", "medium", "high", "max"].map((e) => h("option", { value: e, selected: e === "medium" }, e)));
  const err = h("span", { class: "error", id: "run-error" });
  const form = h("form", { id: "run-form", class: "inline", onsubmit: async (e) => {
    e.preventDefault();
    try {
      const model = "research/" + (await modelNames())[0];
      const r = await api("POST", "/v1/research", { input: input.value, model, effort: effort.value });
      location.hash = "#/research/" + encodeURIComponent(r.id);
    } catch (x) { err.textContent = x.message; }
  } }, input, effort, h("button", { type: "submit", id: "run-submit" }, "Research"), err);
  const list = await api("GET", "/v1/research?limit=50");
  show(pg, h("h1", {}, "Research runs"), h("div", { class: "card" }, form),
    h("table", { id: "runs" }, h("thead", {}, h("tr", {}, ["Run", "Status", "Question", "Effort", "Sub-questions", "Cost", "Created"].map((c) => h("th", {}, c)))),
      h("tbody", {}, list.data.map((r) => h("tr", {},
        h("td", {}, h("a", { class: "mono", href: "#/research/" + encodeURIComponent(r.id) }, r.id)),
        h("td", {}, badge(r.status)), h("td", {}, r.input), h("td", {}, r.effort),
        h("td", {}, r.usage.sub_questions), h("td", {}, usd(r.usage.cost_usd)), h("td", {}, when(r.created_at)))))));
}

// runPage shows a run: its plan as a tree of rounds and sub-questions, each child's
// status, job and sources, and the report with its citations linked to the sources.
async function runPage(id) {
  const pg = page;
  const content = h("div", { id: "run" });
  show(pg, content);
  let run = await api("GET", "/v1/research/" + encodeURIComponent(id));
  const render = () => content.replaceChildren(runView(run));
  render();
  every(pg, 1000, async () => {
    if (terminalJob(run.status)) return;
    run = await api("GET", "/v1/research/" + encodeURIComponent(id));
    render();
  });
}

function runView(run) {
  const out = run.output;
  const sources = out ? out.sources : [];
  const report = out ? out.report.split("\n## Sources")[0] : "";
  const tree = h("ul", { class: "tree", id: "plan-tree" }, (run.rounds || []).map((rd) => h("li", {}, `Round ${rd.round + 1}`,
    h("ul", {}, rd.questions.map((q) => h("li", { class: "subq", dataset: { status: q.status } },
      badge(q.status), " ", q.question,
      q.job_id ? h("span", {}, " ", h("a", { class: "mono", href: "#/jobs/" + encodeURIComponent(q.job_id) }, q.job_id)) : null,
      q.sources && q.sources.length ? h("ul", { class: "sources" }, q.sources.map((s) => h("li", {}, extLink(s.url, s.title || s.url)))) : null))))));
  const planned = !run.rounds.length && run.plan ? h("ol", { id: "plan-review" }, run.plan.questions.map((q) => h("li", {}, q.question))) : null;
  return h("div", {},
    h("div", { class: "row" }, h("h1", { class: "mono" }, run.id), h("span", { id: "status" }, badge(run.status))),
    h("div", { class: "card grid" },
      stat("Effort", run.effort), stat("Model", run.model), stat("Sub-questions", run.usage.sub_questions, "sub-questions"),
      stat("Searches", run.usage.searches, "searches"), stat("Cost", usd(run.usage.cost_usd), "cost"),
      out ? stat("Citations valid / removed", `${out.citations.valid} / ${out.citations.removed}`, "citations") : null,
      run.incomplete_details ? stat("Stopped", run.incomplete_details.reason, "incomplete") : null),
    h("div", { class: "card" }, h("h2", {}, "Question"), h("p", { class: "answer" }, run.input)),
    h("div", { class: "card" }, h("h2", {}, "Plan"), planned, tree),
    out ? h("div", { class: "card" }, h("h2", {}, "Report"), h("div", { class: "answer", id: "report" }, answerNodes(report, sources)),
      h("h2", {}, "Sources"), h("ol", { id: "run-sources" }, sources.map((s) => h("li", {}, extLink(s.url, s.title || s.url))))) : null,
    run.error ? h("p", { class: "error", id: "run-failed" }, run.error.message) : null);
}

async function spendPage() {
  const pg = page;
  const [usage, daily] = await Promise.all([api("GET", "/v1/usage"), api("GET", "/v1/usage/daily?days=14")]);
  const period = (p, label) => h("div", { class: "card" }, h("h2", {}, `${label} (${p.period})`),
    h("div", { class: "grid" },
      stat("Spent", usd(p.spent_usd)), stat("Searches", p.searches),
      stat("Budget", p.budget_usd != null ? usd(p.budget_usd) : "none"), stat("Left", p.remaining_usd != null ? usd(p.remaining_usd) : "—"),
      stat("Resets", new Date(p.resets_at).toLocaleString())));
  const top = Math.max(0, ...daily.data.map((r) => r.spent_usd));
  show(pg, h("h1", {}, "Spend"), period(usage.day, "Today"), period(usage.month, "This month"),
    h("h2", {}, "Per day and model (the day each job ended, UTC)"),
    h("table", { id: "spend", class: "bars" },
      h("thead", {}, h("tr", {}, ["Day", "Model", "Jobs", "Searches", "Spent", ""].map((c, i) => h("th", { class: i >= 2 && i <= 4 ? "num" : null }, c)))),
      h("tbody", {}, daily.data.length ? daily.data.map((r) => {
        const b = h("div", { class: "bar" });
        b.style.width = (top ? (100 * r.spent_usd) / top : 0) + "%";
        return h("tr", { dataset: { day: r.day, model: r.model } },
          h("td", {}, r.day), h("td", { class: "model" }, r.model), h("td", { class: "num jobs" }, r.jobs), h("td", { class: "num" }, r.searches),
          h("td", { class: "num spent" }, usd(r.spent_usd)), h("td", { style: null }, b));
      }) : h("tr", {}, h("td", { colspan: 6, class: "muted" }, "Nothing spent in the last 14 days.")))));
}

async function enginesPage() {
  const pg = page;
  const body = h("tbody", { id: "engines" });
  show(pg, h("h1", {}, "Engines"),
    h("p", { class: "muted" }, "From this ingress process's metrics since it started (the whole fleet's when it runs every role)."),
    h("table", {}, h("thead", {}, h("tr", {}, ["Engine", "Error rate", "p50 ms", "p95 ms", "Key cooldowns", "Fallback rate", "Outcomes"].map((c) => h("th", {}, c)))), body));
  const load = async () => {
    const list = await api("GET", "/v1/engines");
    body.replaceChildren(...list.data.map((e) => h("tr", { dataset: { engine: e.id } },
      h("td", { class: "mono" }, e.id),
      h("td", { class: "num" }, (100 * e.error_rate).toFixed(1) + "%"),
      h("td", { class: "num" }, e.latency_p50_ms ?? "—"),
      h("td", { class: "num" }, e.latency_p95_ms ?? "—"),
      h("td", {}, Object.entries(e.cooldowns).map(([k, v]) => `${k}: ${v}`).join(", ") || "none"),
      h("td", { class: "num" }, (100 * e.fallback_rate).toFixed(1) + "%"),
      h("td", { class: "muted outcomes" }, Object.entries(e.outcomes).map(([k, v]) => `${k}: ${(100 * v).toFixed(1)}%`).join(", ")))));
  };
  await load();
  every(pg, 5000, load);
}

// ---- start --------------------------------------------------------------------------------

$("#logout").addEventListener("click", () => signOut(""));
window.addEventListener("hashchange", route);

(async () => {
  if (!apiKey) {
    // An open API (no tenants configured) answers without a key.
    const r = await fetch("/v1/jobs?limit=1").catch(() => null);
    openAPI = !!(r && r.ok);
  }
  route();
})();
