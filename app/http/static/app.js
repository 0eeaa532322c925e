// The gateway's own live page: pick a resource from discovery, select and filter, choose
// columns; rows follow the cache over Server-Sent Events (the browser resumes with
// Last-Event-ID by itself; RESET repaints), and a badge per value of `summary` counts them.
// Plain script, no build step, nothing loaded from outside the gateway.
"use strict";

const $ = (selector) => document.querySelector(selector);
const SUMMARY_PATH = "status.phase";
const page = {
  source: null, rows: new Map(), columns: [], synced: false, changed: new Set(),
  collection: "", query: null, summaryTimer: null, renderQueued: false, picked: null,
};
window.kcg = page;  // for people poking at it in the console (and for the page's tests)
// Served at /ui/ (the default cluster) or /clusters/NAME/ui/: every path the page asks is
// under the same prefix, so the page reads the cluster it was opened for.
const BASE = location.pathname.replace(/\/ui\/[^/]*$/, "");

// -- paths: the same dotted syntax the gateway reads (`metadata.labels[app.kubernetes.io/name]`)
function segments(path) {
  const out = [];
  for (const m of path.matchAll(/\[([^\]]+)\]|([^.\[\]]+)/g)) out.push(m[1] ?? m[2]);
  return out;
}
function valueAt(obj, path) {
  let node = obj;
  for (const s of segments(path)) {
    if (node === null || typeof node !== "object") return undefined;
    node = Array.isArray(node) ? node[Number(s)] : node[s];
  }
  return node;
}
function show(value) {
  if (value === undefined || value === null) return "";
  return typeof value === "object" ? JSON.stringify(value) : String(value);
}

// -- discovery ------------------------------------------------------------------------------
async function getJSON(url) {
  const answer = await fetch(url, {headers: {Accept: "application/json"}});
  if (!answer.ok) throw new Error(`${url}: ${answer.status} ${(await answer.json().catch(() => ({}))).message ?? ""}`);
  return answer.json();
}
async function discover() {
  const found = [];
  const add = (group, version, list) => {
    for (const r of list.resources) {
      if (r.name.includes("/") || !r.verbs.includes("list") || !r.verbs.includes("watch")) continue;
      found.push({id: `${group || "core"}/${version}/${r.name}`, namespaced: r.namespaced,
                  label: group ? `${r.name}.${group}` : r.name});
    }
  };
  add("", "v1", await getJSON(`${BASE}/api/v1`));
  const groups = (await getJSON(`${BASE}/apis`)).groups;
  await Promise.all(groups.map(async (g) => {
    try { add(g.name, g.preferredVersion.version, await getJSON(`${BASE}/apis/${g.preferredVersion.groupVersion}`)); }
    catch (e) { /* a group that does not answer is left out */ }
  }));
  found.sort((a, b) => a.label.localeCompare(b.label));
  const select = $("#resource");
  select.replaceChildren(...found.map((r) => new Option(r.label, r.id)));
  select.dataset.namespaced = JSON.stringify(Object.fromEntries(found.map((r) => [r.id, r.namespaced])));
}

// -- the query ------------------------------------------------------------------------------
function readForm() {
  const form = new FormData($("#query"));
  return {
    resource: form.get("resource") || "core/v1/pods",
    namespace: form.get("namespace").trim(),
    labelSelector: form.get("labelSelector").trim(),
    filters: form.get("filter").split(";").map((f) => f.trim()).filter(Boolean),
    columns: form.get("columns").split(",").map((c) => c.trim()).filter(Boolean),
  };
}
function writeForm(query) {
  if ([...$("#resource").options].some((o) => o.value === query.resource)) $("#resource").value = query.resource;
  $("#namespace").value = query.namespace;
  $("#labelSelector").value = query.labelSelector;
  $("#filter").value = query.filters.join("; ");
  if (query.columns.length) $("#columns").value = query.columns.join(",");
}
function fromLocation() {
  const p = new URLSearchParams(location.search);
  return {resource: p.get("resource") || "core/v1/pods", namespace: p.get("namespace") || "",
          labelSelector: p.get("labelSelector") || "", filters: p.getAll("filter"),
          columns: (p.get("columns") || "").split(",").filter(Boolean)};
}
function toLocation(query) {
  const p = new URLSearchParams({resource: query.resource});
  if (query.namespace) p.set("namespace", query.namespace);
  if (query.labelSelector) p.set("labelSelector", query.labelSelector);
  for (const f of query.filters) p.append("filter", f);
  p.set("columns", query.columns.join(","));
  history.replaceState(null, "", `?${p}`);
}
function collectionOf(query) {
  const [group, version, resource] = query.resource.split("/");
  const ns = query.namespace ? `namespaces/${encodeURIComponent(query.namespace)}/` : "";
  return `${BASE}/${group}/${version}/${ns}${resource}`;
}
function parameters(query, extra) {
  const p = new URLSearchParams();
  if (query.labelSelector) p.set("labelSelector", query.labelSelector);
  for (const f of query.filters) p.append("filter", f);
  for (const [k, v] of Object.entries(extra)) p.set(k, v);
  return p.toString();
}

// -- the stream -----------------------------------------------------------------------------
function keyOf(obj) {
  const m = obj.metadata || {};
  return m.namespace ? `${m.namespace}/${m.name}` : m.name;
}
function setState(state) {
  const badge = $("#state");
  badge.dataset.state = state;
  badge.textContent = state;
}
function start(query) {
  if (page.source) page.source.close();
  page.query = query;
  page.rows.clear();
  page.synced = false;
  page.columns = query.columns.length ? query.columns : ["metadata.namespace", "metadata.name"];
  page.collection = collectionOf(query);
  $("#message").textContent = "";
  renderHead();
  render();
  const fields = page.columns.filter((c) => !["metadata.name", "metadata.namespace"].includes(c));
  const extra = fields.length ? {fields: fields.join(",")} : {};
  const source = new EventSource(`${page.collection}?${parameters(query, extra)}`);
  page.source = source;
  setState("connecting");
  source.onopen = () => setState(page.synced ? "live" : "loading");
  source.onerror = () => { if (source.readyState !== EventSource.CLOSED) setState("reconnecting"); };
  const change = (e) => {
    const obj = JSON.parse(e.data);
    const key = keyOf(obj);
    if (e.type === "DELETED") page.rows.delete(key); else page.rows.set(key, obj);
    if (page.synced) page.changed.add(key);
    queueRender();
  };
  for (const kind of ["ADDED", "MODIFIED", "DELETED"]) source.addEventListener(kind, change);
  source.addEventListener("RESET", () => { page.rows.clear(); page.synced = false; queueRender(); });
  source.addEventListener("SYNCED", () => { page.synced = true; setState("live"); queueRender(); });
  source.addEventListener("ERROR", (e) => {
    const status = JSON.parse(e.data);
    $("#message").textContent = `${status.code} ${status.reason}: ${status.message}`;
    if (status.code !== 429 && status.code !== 503) { source.close(); setState("stopped"); }
  });
  refreshSummary();
}
async function refreshSummary() {
  clearTimeout(page.summaryTimer);
  page.summaryTimer = null;
  const query = page.query;
  try {
    const doc = await getJSON(`${page.collection}?${parameters(query, {summary: SUMMARY_PATH})}`);
    if (query !== page.query) return;
    const badges = Object.entries(doc.counts[SUMMARY_PATH]).map(([value, n]) => {
      const badge = document.createElement("span");
      badge.className = "badge";
      badge.dataset.value = value;
      badge.append(value || "(none)", Object.assign(document.createElement("b"), {textContent: n}));
      return badge;
    });
    const total = Object.assign(document.createElement("span"), {className: "badge", textContent: "total"});
    total.dataset.value = "*";
    total.append(Object.assign(document.createElement("b"), {textContent: doc.total}));
    $("#badges").replaceChildren(total, ...badges);
  } catch (e) {
    $("#message").textContent = e.message;
    $("#badges").replaceChildren();
  }
}

// -- the table ------------------------------------------------------------------------------
function queueRender() {
  if (page.renderQueued) return;
  page.renderQueued = true;
  requestAnimationFrame(() => { page.renderQueued = false; render(); });
  if (page.synced && page.summaryTimer === null) page.summaryTimer = setTimeout(refreshSummary, 500);
}
function renderHead() {
  $("#rows thead tr").replaceChildren(...page.columns.map((c) =>
    Object.assign(document.createElement("th"), {textContent: c, title: c})));
}
function render() {
  const keys = [...page.rows.keys()].sort();
  $("#rows tbody").replaceChildren(...keys.map((key) => {
    const obj = page.rows.get(key);
    const tr = document.createElement("tr");
    tr.dataset.key = key;
    if (page.changed.has(key)) tr.className = "changed";
    if (page.picked === key) tr.classList.add("picked");
    tr.append(...page.columns.map((c) => {
      const text = show(valueAt(obj, c));
      return Object.assign(document.createElement("td"), {textContent: text, title: text});
    }));
    return tr;
  }));
  page.changed.clear();
}

// -- the past: one object's history, or a namespace's changes in an hour ---------------------
function historyPath(collection) {
  return `${BASE}/history${collection.slice(BASE.length)}`;
}
function opText(op) {
  const value = "value" in op ? ` ${JSON.stringify(op.value)}` : "";
  return `${op.op} ${op.path}${op.from ? ` from ${op.from}` : ""}${value}`;
}
function renderChanges(items, withName) {
  $("#changes").replaceChildren(...items.map((change) => {
    const li = document.createElement("li");
    li.dataset.version = change.resourceVersion;
    const head = Object.assign(document.createElement("div"), {className: "head"});
    const type = Object.assign(document.createElement("span"), {className: "type", textContent: change.type});
    type.dataset.type = change.type;
    head.append(type);
    if (withName && change.object) {
      head.append(Object.assign(document.createElement("span"), {className: "name", textContent: keyOf(change.object)}));
    }
    head.append(Object.assign(document.createElement("span"), {textContent: change.time}),
                Object.assign(document.createElement("span"), {textContent: `resourceVersion ${change.resourceVersion}`}));
    li.append(head);
    if (change.patch) {
      const ops = Object.assign(document.createElement("ul"), {className: "ops"});
      ops.append(...change.patch.map((op) => Object.assign(document.createElement("li"), {textContent: opText(op)})));
      li.append(ops);
    }
    return li;
  }));
}
async function showPast(url, title, withName) {
  $("#past").hidden = false;
  $("#past-title").textContent = title;
  $("#past-message").textContent = "";
  try {
    const doc = await getJSON(url);
    renderChanges(doc.items, withName);
    if (!doc.items.length) $("#past-message").textContent = "no change kept";
  } catch (e) {
    $("#changes").replaceChildren();
    $("#past-message").textContent = e.message;
  }
}
function showObjectHistory(key) {
  const name = key.split("/").pop();
  const obj = page.rows.get(key) || {};
  const ns = (obj.metadata || {}).namespace;
  const [group, version, resource] = page.query.resource.split("/");
  const where = ns ? `namespaces/${encodeURIComponent(ns)}/` : "";
  page.picked = key;
  for (const tr of document.querySelectorAll("#rows tbody tr")) tr.classList.toggle("picked", tr.dataset.key === key);
  showPast(`${BASE}/history/${group}/${version}/${where}${resource}/${encodeURIComponent(name)}?limit=50`,
           `History of ${key}`, false);
}
function showHour(from) {
  const since = new Date(from);
  const until = new Date(since.getTime() + 3600 * 1000);
  const p = new URLSearchParams({since: since.toISOString(), until: until.toISOString(), limit: "500"});
  if (page.query.labelSelector) p.set("labelSelector", page.query.labelSelector);
  showPast(`${historyPath(page.collection)}?${p}`,
           `Changes from ${since.toISOString()} to ${until.toISOString()}`, true);
}

// -- clusters: a picker when the gateway serves more than one -------------------------------
async function pickCluster() {
  const list = await getJSON("/clusters");
  if (list.items.length < 2) return;
  const here = BASE.startsWith("/clusters/") ? BASE.slice("/clusters/".length)
    : (list.items.find((c) => c.default) || {}).name;
  const select = $("#cluster");
  select.replaceChildren(...list.items.map((c) => {
    const option = new Option(c.ready ? c.name : `${c.name} (not ready)`, c.name);
    option.selected = c.name === here;
    return option;
  }));
  select.closest("label").hidden = false;
  select.addEventListener("change", () => {
    location.assign(`/clusters/${encodeURIComponent(select.value)}/ui/${location.search}`);
  });
}

// -- wiring ---------------------------------------------------------------------------------
$("#rows tbody").addEventListener("click", (e) => {
  const tr = e.target.closest("tr");
  if (tr && tr.dataset.key) showObjectHistory(tr.dataset.key);
});
$("#hour").addEventListener("submit", (e) => {
  e.preventDefault();
  if ($("#from").value) showHour($("#from").value);
});
pickCluster().catch(() => { /* one cluster, or the list is not ours to read: no picker */ });
$("#query").addEventListener("submit", (e) => {
  e.preventDefault();
  const query = readForm();
  toLocation(query);
  start(query);
});
discover().catch((e) => { $("#message").textContent = `discovery: ${e.message}`; }).finally(() => {
  const query = fromLocation();
  writeForm(query);
  query.columns = readForm().columns;
  start(query);
});
