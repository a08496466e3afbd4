// The TesseraDB console: plain JavaScript over the server's HTTP API (docs/server.md).
// The token stays in this tab's sessionStorage and goes in each request's
// Authorization header; images are fetched with it and shown as blob URLs.
"use strict";

const $ = (id) => document.getElementById(id);
const state = {
  token: sessionStorage.getItem("tessera-token") || "",
  catalog: [],
  query: null, // {id, offset, limit, sql, params}
  array: null, // {name, info, version, axes:[a,b], view:{lo:[..],hi:[..]}, fixed:{dim:index}}
  docsOffset: 0,
};

// --- requests --------------------------------------------------------------------------
async function api(path, options = {}) {
  const headers = Object.assign({ Authorization: "Bearer " + state.token }, options.headers || {});
  const response = await fetch(path, Object.assign({}, options, { headers }));
  if (!response.ok) {
    let message = response.status + " " + response.statusText;
    try {
      const body = await response.json();
      message = body.error || message;
    } catch (e) { /* not JSON */ }
    const error = new Error(message);
    error.status = response.status;
    throw error;
  }
  return response;
}

async function apiJSON(path, body) {
  const options = body === undefined ? {} : {
    method: "POST",
    headers: { "Content-Type": "application/json", Accept: "application/json" },
    body: JSON.stringify(body),
  };
  return (await api(path, options)).json();
}

async function imageInto(img, path) {
  const blob = await (await api(path)).blob();
  if (img.dataset.url) URL.revokeObjectURL(img.dataset.url);
  const url = URL.createObjectURL(blob);
  img.dataset.url = url;
  await new Promise((resolve, reject) => {
    img.onload = resolve;
    img.onerror = reject;
    img.src = url;
  });
}

function showError(error) {
  const box = $("error");
  if (!error) { box.hidden = true; box.textContent = ""; return; }
  box.textContent = error.message || String(error);
  box.hidden = false;
  if (error.status === 401) signOut();
}

function guarded(fn) {
  return async (...args) => {
    try {
      showError(null);
      await fn(...args);
    } catch (error) {
      showError(error);
    }
  };
}

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "onclick") node.onclick = v; else node.setAttribute(k, v);
  }
  for (const child of children) node.append(child instanceof Node ? child : String(child));
  return node;
}

// --- signing in ------------------------------------------------------------------------
async function signIn(token) {
  state.token = token;
  const me = await apiJSON("/api/whoami");
  sessionStorage.setItem("tessera-token", token);
  $("whoami").textContent = me.name + (me.read_only ? " (read-only server)" : "");
  $("login").hidden = true;
  $("app").hidden = false;
  showTab("sql");
  await loadCatalog();
  renderHistory();
}

function signOut() {
  sessionStorage.removeItem("tessera-token");
  state.token = "";
  $("app").hidden = true;
  $("login").hidden = false;
}

$("login-form").onsubmit = async (event) => {
  event.preventDefault();
  try {
    $("login-error").hidden = true;
    await signIn($("token").value.trim());
  } catch (error) {
    $("login-error").textContent = error.status === 401 ? "That token is not known." : error.message;
    $("login-error").hidden = false;
  }
};
$("sign-out").onclick = signOut;

// --- tabs and the catalog ----------------------------------------------------------------
function showTab(name) {
  for (const panel of document.querySelectorAll(".panel")) panel.hidden = panel.id !== "tab-" + name;
  for (const tab of document.querySelectorAll(".tab")) tab.classList.toggle("active", tab.dataset.tab === name);
}
for (const tab of document.querySelectorAll(".tab")) tab.onclick = () => showTab(tab.dataset.tab);

async function loadCatalog() {
  const body = await apiJSON("/catalog");
  state.catalog = body.objects;
  const box = $("catalog");
  box.textContent = "";
  const kinds = {};
  for (const o of body.objects) (kinds[o.kind] = kinds[o.kind] || []).push(o);
  for (const kind of Object.keys(kinds).sort()) {
    box.append(el("div", { class: "kind" }, kind));
    for (const o of kinds[kind]) {
      box.append(el("a", { "data-name": o.name, onclick: guarded(() => openObject(o.name)) }, o.name));
    }
  }
  fillSelect($("array-name"), names("array"));
  fillSelect($("stream-name"), names("stream"));
  fillSelect($("docs-name"), names("collection"));
}
$("refresh-catalog").onclick = guarded(loadCatalog);

function names(kind) {
  return state.catalog.filter((o) => o.kind === kind).map((o) => o.name);
}

function fillSelect(select, values, chosen) {
  select.textContent = "";
  for (const v of values) {
    const [value, label] = Array.isArray(v) ? v : [v, v];
    select.append(el("option", { value }, label));
  }
  if (chosen !== undefined) select.value = chosen;
}

function formatBytes(n) {
  if (n === null || n === undefined) return "";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return n.toFixed(i ? 1 : 0) + " " + units[i];
}

async function openObject(name) {
  const info = await apiJSON("/objects/" + encodeURIComponent(name));
  const box = $("object-detail");
  box.textContent = "";
  box.append(el("h2", {}, info.name + " (" + info.kind + ")"));
  const facts = el("table");
  const add = (k, v) => facts.append(el("tr", {}, el("th", {}, k), el("td", {}, v)));
  for (const key of ["records", "segments", "objects", "rows"]) if (info[key] !== undefined) add(key, info[key].toLocaleString());
  if (info.bytes !== undefined) add("size", formatBytes(info.bytes));
  if (info.extent) add("extent", info.extent.join(" x "));
  if (info.descriptor) add("indexed by", info.descriptor.index.join(", "));
  if (info.files) add("files", info.files.join("\n"));
  if (info.indexes) add("indexes", Object.keys(info.indexes).join(", ") || "none");
  box.append(facts);
  if (info.schema) {
    box.append(el("h3", {}, "Schema"));
    const schema = el("table");
    for (const f of info.schema) schema.append(el("tr", {}, el("td", {}, f.name), el("td", {}, f.type)));
    box.append(schema);
  }
  if (info.versions) {
    box.append(el("h3", {}, "Versions (newest first)"));
    const list = el("table");
    info.versions.forEach((v, i) => {
      list.append(el("tr", {},
        el("td", {}, v.time), el("td", {}, v.message), el("td", {}, v.id),
        el("td", {}, el("button", { onclick: guarded(() => openArray(name, i === 0 ? "" : v.id)) }, "view"))));
    });
    box.append(list);
  }
  const actions = el("div", { class: "row" });
  if (info.kind === "array") actions.append(el("button", { onclick: guarded(() => openArray(name, "")) }, "Open in the array viewer"));
  if (info.kind === "stream") actions.append(el("button", { onclick: guarded(() => openStream(name)) }, "Plot"));
  if (info.kind === "collection") actions.append(el("button", { onclick: guarded(() => openDocuments(name)) }, "Browse documents"));
  if (["table", "stream", "array", "collection"].includes(info.kind)) {
    actions.append(el("button", { onclick: () => { $("sql-editor").value = `SELECT * FROM "${name}" LIMIT 100`; showTab("sql"); } }, "Query in SQL"));
  }
  box.append(actions);
  showTab("object");
}

// --- SQL -------------------------------------------------------------------------------
function parseParams() {
  const text = $("sql-params").value.trim();
  if (!text) return null;
  try {
    return JSON.parse(text);
  } catch (e) {
    throw new Error("params are JSON: " + e.message);
  }
}

function newId() {
  return Array.from(crypto.getRandomValues(new Uint8Array(16)), (b) => b.toString(16).padStart(2, "0")).join("");
}

async function runPage(offset) {
  const q = state.query;
  q.offset = offset;
  q.id = newId();
  $("cancel").disabled = false;
  $("run").disabled = true;
  const started = performance.now();
  const poll = setInterval(async () => {
    try {
      const p = await apiJSON("/queries/" + q.id);
      const pct = p.fraction === null ? "" : " " + Math.round(p.fraction * 100) + "%";
      $("sql-status").textContent = "running" + pct + ", " + p.seconds.toFixed(1) + " s";
    } catch (e) { /* finished meanwhile */ }
  }, 300);
  try {
    const body = await apiJSON("/sql", { sql: q.sql, params: q.params, query_id: q.id, offset, limit: q.limit });
    const seconds = ((performance.now() - started) / 1000).toFixed(2);
    renderGrid(body);
    $("sql-status").textContent = body.rows.length + " row(s) in " + seconds + " s";
    $("page-info").textContent = body.columns.length ? "rows " + (offset + 1) + "-" + (offset + body.rows.length) : "";
    $("prev-page").disabled = offset === 0;
    $("next-page").disabled = !body.more;
  } catch (error) {
    $("sql-status").textContent = "";
    throw error;
  } finally {
    clearInterval(poll);
    $("cancel").disabled = true;
    $("run").disabled = false;
  }
}

function renderGrid(body) {
  const grid = $("result-grid");
  grid.textContent = "";
  if (!body.columns.length) return;
  grid.append(el("tr", {}, ...body.columns.map((c, i) => el("th", { title: body.types[i] }, c))));
  for (const row of body.rows) {
    grid.append(el("tr", {}, ...row.map((v) => el("td", {}, v === null ? "NULL" : typeof v === "object" ? JSON.stringify(v) : v))));
  }
}

$("run").onclick = guarded(async () => {
  const sql = $("sql-editor").value;
  $("plan").hidden = true;
  state.query = { sql, params: parseParams(), limit: Math.max(1, parseInt($("page-size").value, 10) || 50) };
  remember(sql);
  await runPage(0);
});
$("next-page").onclick = guarded(() => runPage(state.query.offset + state.query.limit));
$("prev-page").onclick = guarded(() => runPage(Math.max(0, state.query.offset - state.query.limit)));
$("cancel").onclick = guarded(async () => {
  if (state.query && state.query.id) await api("/queries/" + state.query.id + "/cancel", { method: "POST" });
});
$("explain").onclick = guarded(async () => {
  const body = await apiJSON("/explain", { sql: $("sql-editor").value, params: parseParams() });
  $("plan").textContent = body.plan;
  $("plan").hidden = false;
});
$("sql-editor").onkeydown = (event) => {
  if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) $("run").click();
};

function remember(sql) {
  const history = JSON.parse(localStorage.getItem("tessera-history") || "[]").filter((s) => s !== sql);
  history.unshift(sql);
  localStorage.setItem("tessera-history", JSON.stringify(history.slice(0, 50)));
  renderHistory();
}

function renderHistory() {
  const list = $("history");
  list.textContent = "";
  for (const sql of JSON.parse(localStorage.getItem("tessera-history") || "[]")) {
    list.append(el("li", {}, el("a", { href: "#", onclick: (e) => { e.preventDefault(); $("sql-editor").value = sql; } }, sql.slice(0, 200))));
  }
}

// --- arrays ----------------------------------------------------------------------------
async function openArray(name, version) {
  const info = await apiJSON("/objects/" + encodeURIComponent(name));
  const dims = info.array.dims;
  const n = dims.length;
  const axes = n >= 2 ? [n - 2, n - 1] : [0, 0];
  const lo = dims.map((d) => d.start);
  const hi = dims.map((d, i) => d.start + info.extent[i]);
  state.array = { name, info, version: version || "", axes, view: { lo: lo.slice(), hi: hi.slice() }, full: { lo, hi }, fixed: {} };
  dims.forEach((d, i) => { if (!axes.includes(i)) state.array.fixed[i] = d.start; });
  fillSelect($("array-name"), names("array"), name);
  fillSelect($("array-attr"), info.array.attrs.map((a) => a.name));
  fillSelect($("array-version"), [["", "latest"], ...info.versions.slice(1).map((v) => [v.id, v.time + " " + v.message])], version || "");
  const sliders = $("array-sliders");
  sliders.textContent = "";
  dims.forEach((d, i) => {
    if (axes.includes(i)) return;
    const input = el("input", { type: "range", min: lo[i], max: hi[i] - 1, value: lo[i], id: "slider-" + d.name });
    const label = el("span", {}, lo[i]);
    input.oninput = () => { label.textContent = input.value; };
    input.onchange = guarded(() => { state.array.fixed[i] = parseInt(input.value, 10); return showArray(); });
    sliders.append(el("label", {}, d.name + " "), input, label);
  });
  showTab("array");
  await showArray();
}

function boxText() {
  const a = state.array;
  return a.info.array.dims.map((d, i) => a.axes.includes(i) ? a.view.lo[i] + ":" + a.view.hi[i] : String(a.fixed[i])).join(",");
}

async function showArray() {
  const a = state.array;
  if (!a) return;
  const params = new URLSearchParams({ box: boxText(), attr: $("array-attr").value, format: "png", cmap: $("array-cmap").value, max_side: "1024" });
  if ($("array-vmin").value.trim()) params.set("vmin", $("array-vmin").value.trim());
  if ($("array-vmax").value.trim()) params.set("vmax", $("array-vmax").value.trim());
  if (a.version) params.set("version", a.version);
  await imageInto($("array-image"), "/arrays/" + encodeURIComponent(a.name) + "/slab?" + params);
  const dims = a.info.array.dims;
  $("array-box").textContent = "box " + boxText() + " (" + dims.map((d) => d.name).join(", ") + ")";
}

$("array-show").onclick = guarded(() => {
  const name = $("array-name").value;
  const version = $("array-version").value;
  if (!state.array || state.array.name !== name || state.array.version !== version) {
    const attr = $("array-attr").value;
    return openArray(name, version).then(() => { if (attr) { $("array-attr").value = attr; return showArray(); } });
  }
  return showArray();
});
$("array-reset").onclick = guarded(() => {
  const a = state.array;
  a.view = { lo: a.full.lo.slice(), hi: a.full.hi.slice() };
  return showArray();
});

function cellAt(event) {
  const a = state.array;
  const img = $("array-image");
  const rect = img.getBoundingClientRect();
  const [r, c] = a.axes;
  const fy = (event.clientY - rect.top) / rect.height;
  const fx = (event.clientX - rect.left) / rect.width;
  const y = Math.floor(a.view.lo[r] + fy * (a.view.hi[r] - a.view.lo[r]));
  const x = Math.floor(a.view.lo[c] + fx * (a.view.hi[c] - a.view.lo[c]));
  return { y, x, fy, fx };
}

let cellTimer = null;
$("array-image").onmousemove = (event) => {
  if (!state.array || drag) return;
  clearTimeout(cellTimer);
  cellTimer = setTimeout(guarded(async () => {
    const a = state.array;
    const { y, x } = cellAt(event);
    const at = a.info.array.dims.map((d, i) => (i === a.axes[0] ? y : i === a.axes[1] ? x : a.fixed[i]));
    const params = new URLSearchParams({ at: at.join(",") });
    if (a.version) params.set("version", a.version);
    const body = await apiJSON("/arrays/" + encodeURIComponent(a.name) + "/cell?" + params);
    $("cell-value").textContent = "[" + at.join(", ") + "] " + Object.entries(body.values).map(([k, v]) => k + "=" + v).join(" ");
  }), 120);
};

function clampView(lo, hi, i) {
  const a = state.array;
  const size = Math.max(1, Math.min(hi - lo, a.full.hi[i] - a.full.lo[i]));
  lo = Math.max(a.full.lo[i], Math.min(lo, a.full.hi[i] - size));
  return [Math.round(lo), Math.round(lo + size)];
}

$("array-image").onwheel = (event) => {
  if (!state.array) return;
  event.preventDefault();
  const a = state.array;
  const { fy, fx } = cellAt(event);
  const scale = event.deltaY < 0 ? 0.8 : 1.25;
  a.axes.forEach((axis, k) => {
    const f = k === 0 ? fy : fx;
    const span = a.view.hi[axis] - a.view.lo[axis];
    const center = a.view.lo[axis] + f * span;
    const next = Math.max(2, span * scale);
    [a.view.lo[axis], a.view.hi[axis]] = clampView(center - f * next, center - f * next + next, axis);
  });
  guarded(showArray)();
};

let drag = null;
$("array-image").onmousedown = (event) => {
  if (!state.array) return;
  drag = { x: event.clientX, y: event.clientY, lo: state.array.view.lo.slice(), hi: state.array.view.hi.slice() };
};
window.addEventListener("mouseup", (event) => {
  if (!drag) return;
  const a = state.array;
  const rect = $("array-image").getBoundingClientRect();
  const moved = [(event.clientY - drag.y) / rect.height, (event.clientX - drag.x) / rect.width];
  drag = moved[0] === 0 && moved[1] === 0 ? null : drag;
  if (!drag) return;
  a.axes.forEach((axis, k) => {
    const span = drag.hi[axis] - drag.lo[axis];
    const shift = -moved[k] * span;
    [a.view.lo[axis], a.view.hi[axis]] = clampView(drag.lo[axis] + shift, drag.hi[axis] + shift, axis);
  });
  drag = null;
  guarded(showArray)();
});

// --- streams ---------------------------------------------------------------------------
async function openStream(name) {
  const info = await apiJSON("/objects/" + encodeURIComponent(name));
  const fields = info.descriptor.fields;
  fillSelect($("stream-name"), names("stream"), name);
  fillSelect($("stream-x"), fields, fields[0]);
  fillSelect($("stream-y"), fields, fields[Math.min(fields.length - 1, fields.length > 2 ? 2 : 1)]);
  fillSelect($("stream-field"), info.descriptor.index);
  showTab("stream");
  await plotStream();
}

async function plotStream() {
  const name = $("stream-name").value;
  const params = new URLSearchParams({ x: $("stream-x").value, y: $("stream-y").value, kind: $("stream-kind").value });
  const lo = $("stream-lo").value.trim();
  const hi = $("stream-hi").value.trim();
  if (lo || hi) params.set($("stream-field").value, lo + ":" + hi);
  await imageInto($("stream-image"), "/streams/" + encodeURIComponent(name) + "/plot?" + params);
}
$("stream-show").onclick = guarded(() => {
  const name = $("stream-name").value;
  return $("stream-x").options.length ? plotStream() : openStream(name);
});
$("stream-name").onchange = guarded(() => openStream($("stream-name").value));

// --- documents -------------------------------------------------------------------------
function jsonTree(value, key) {
  const label = key === undefined ? "" : key + ": ";
  if (value !== null && typeof value === "object") {
    const entries = Array.isArray(value) ? value.map((v, i) => [i, v]) : Object.entries(value);
    const node = el("details", { open: "" }, el("summary", {}, label + (Array.isArray(value) ? "[" + entries.length + "]" : "{" + entries.length + "}")));
    for (const [k, v] of entries) node.append(jsonTree(v, k));
    return node;
  }
  const cls = typeof value === "string" ? "json-str" : "json-num";
  return el("div", {}, el("span", { class: "json-key" }, label), el("span", { class: cls }, JSON.stringify(value)));
}

async function openDocuments(name, offset = 0) {
  fillSelect($("docs-name"), names("collection"), name);
  state.docsOffset = offset;
  const body = await apiJSON("/collections/" + encodeURIComponent(name) + "/documents?offset=" + offset + "&limit=20");
  const box = $("documents");
  box.textContent = "";
  body.documents.forEach((d, i) => box.append(jsonTree(d, "#" + (offset + i + 1))));
  $("docs-page").textContent = "objects " + (offset + 1) + "-" + (offset + body.documents.length);
  if (!$("argo-editor").value) $("argo-editor").value = "SELECT * FROM " + name + " LIMIT 5";
  showTab("documents");
}
$("docs-name").onchange = guarded(() => openDocuments($("docs-name").value));
$("docs-next").onclick = guarded(() => openDocuments($("docs-name").value, state.docsOffset + 20));
$("docs-prev").onclick = guarded(() => openDocuments($("docs-name").value, Math.max(0, state.docsOffset - 20)));
$("argo-run").onclick = guarded(async () => {
  const body = await apiJSON("/argo", { statement: $("argo-editor").value });
  const box = $("argo-result");
  box.textContent = "";
  box.append(jsonTree(body.rows, "rows"));
});

// --- running statements --------------------------------------------------------------------
async function listQueries() {
  const body = await apiJSON("/queries");
  const table = $("queries");
  table.textContent = "";
  table.append(el("tr", {}, el("th", {}, "user"), el("th", {}, "seconds"), el("th", {}, "progress"), el("th", {}, "rows"), el("th", {}, "SQL"), el("th", {}, "")));
  for (const q of body.queries) {
    table.append(el("tr", {},
      el("td", {}, q.user), el("td", {}, q.seconds.toFixed(1)),
      el("td", {}, q.fraction === null ? "" : Math.round(q.fraction * 100) + "%"), el("td", {}, q.rows),
      el("td", {}, q.sql.slice(0, 120)),
      el("td", {}, el("button", { onclick: guarded(async () => { await api("/queries/" + q.id + "/cancel", { method: "POST" }); await listQueries(); }) }, "cancel"))));
  }
}
$("queries-refresh").onclick = guarded(listQueries);

$("load-run").onclick = guarded(async () => {
  const body = { source: $("load-source").value.trim() };
  if ($("load-into").value.trim()) body.into = $("load-into").value.trim();
  if ($("load-kind").value) body.kind = $("load-kind").value;
  $("load-status").textContent = "loading...";
  const poll = setInterval(() => listQueries().catch(() => {}), 500);
  try {
    const done = await apiJSON("/load", body);
    $("load-status").textContent = (done.created ? "created " : "appended to ") + done.kind + " " + done.name + ": " + done.items.toLocaleString() + " items";
    await loadCatalog();
  } catch (error) {
    $("load-status").textContent = "";
    throw error;
  } finally {
    clearInterval(poll);
    await listQueries().catch(() => {});
  }
});

// --- start -------------------------------------------------------------------------------
if (state.token) {
  signIn(state.token).catch(() => signOut());
}
