// The console: reads and writes through the JSON API, nothing else. No build step.
"use strict";

const state = { scope: "", memory: null, info: null, next: null };
const $ = (id) => document.getElementById(id);

function token() { return sessionStorage.getItem("loopctl-memory-token") || ""; }

async function call(method, path, body) {
  const headers = { "Accept": "application/json" };
  if (token()) headers["Authorization"] = "Bearer " + token();
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const response = await fetch(path, {
    method, headers, body: body === undefined ? undefined : JSON.stringify(body),
    credentials: "omit", cache: "no-store",
  });
  if (response.status === 401) { showLogin(); throw new Error("this server needs its token"); }
  const answer = await response.json();
  if (!response.ok) throw new Error(answer.error || response.statusText);
  return answer;
}

function showLogin() { $("login").hidden = false; $("console").hidden = true; }

function say(text) { $("status").textContent = text; }

function cell(row, text, className) {
  const td = document.createElement("td");
  td.textContent = text;
  if (className) td.className = className;
  row.appendChild(td);
  return td;
}

async function start() {
  try {
    state.info = await call("GET", "/api/info");
  } catch (error) { return; }
  $("login").hidden = true;
  $("console").hidden = false;
  $("mode").textContent = (state.info.read_only ? "read-only · " : "") +
    "ranked by " + state.info.ranking;
  document.body.classList.toggle("read-only", state.info.read_only);
  await loadScopes();
  await search();
  await loadStats();
}

async function loadScopes() {
  const scopes = await call("GET", "/api/scopes?descendants=1");
  const list = $("scopes");
  list.replaceChildren();
  const all = document.createElement("li");
  all.textContent = "(all)";
  all.className = state.scope === "" ? "chosen" : "";
  all.onclick = () => { state.scope = ""; loadScopes(); search(); loadStats(); };
  list.appendChild(all);
  for (const { scope, memories } of scopes) {
    const item = document.createElement("li");
    item.textContent = (scope || "(root)") + " · " + memories;
    item.style.paddingLeft = (scope ? scope.split("/").length : 0) + "em";
    item.className = state.scope === scope && scope ? "chosen" : "";
    item.dataset.scope = scope;
    item.onclick = () => { state.scope = scope; loadScopes(); search(); loadStats(); };
    list.appendChild(item);
  }
}

async function search(event, before) {
  if (event) event.preventDefault();
  const params = filterParams();
  if (before) params.set("before", before);
  params.set("limit", "50");
  const query = $("query").value.trim();
  if (query) params.set("q", query);
  if ($("ranking").value) params.set("ranking", $("ranking").value);
  try {
    const answer = await call("GET", "/api/memories?" + params);
    state.next = answer.next || null;
    $("older").hidden = !state.next;
    showResults(answer.memories, query, Boolean(before));
  } catch (error) { say(error.message); }
}

function showResults(memories, query, more) {
  $("detail").hidden = true;
  $("browse").hidden = false;
  const body = $("results").tBodies[0];
  if (!more) body.replaceChildren();
  if (!more) say(memories.length ? "" : (query ? "Nothing matches." : "No memories here."));
  for (const memory of memories) {
    const row = body.insertRow();
    row.className = "memory";
    row.dataset.id = memory.id;
    const parts = memory.parts ? Object.entries(memory.parts)
      .map(([name, value]) => name + " " + Number(value).toPrecision(4)).join(", ") : "";
    const score = cell(row, memory.score === undefined ? "" : Number(memory.score).toPrecision(4));
    score.title = parts;
    cell(row, memory.memory, "text");
    cell(row, memory.category);
    cell(row, (memory.tags || []).join(", "));
    cell(row, memory.scope || "(own)");
    row.onclick = () => openMemory(memory.id);
  }
}

async function openMemory(id) {
  say("");
  const params = new URLSearchParams();
  if (state.scope) params.set("scope", state.scope);
  const answer = await call("GET", "/api/memories/" + id + "?" + params);
  state.memory = answer.memory;
  $("browse").hidden = true;
  $("detail").hidden = false;
  $("edit").hidden = !answer.memory;
  const fields = $("fields");
  fields.replaceChildren();
  if (answer.memory) {
    for (const [name, value] of Object.entries(answer.memory)) {
      const term = document.createElement("dt");
      term.textContent = name;
      const definition = document.createElement("dd");
      definition.textContent = typeof value === "object" ? JSON.stringify(value) : String(value);
      fields.append(term, definition);
    }
    $("edit-memory").value = answer.memory.memory;
    $("edit-category").value = answer.memory.category;
    $("edit-tags").value = (answer.memory.tags || []).join(", ");
    $("edit-relevance").value = answer.memory.relevance;
  } else {
    say("This memory is gone; its history remains.");
  }
  const body = $("history").tBodies[0];
  body.replaceChildren();
  for (const event of answer.history) {
    const row = body.insertRow();
    row.className = "event " + event.event;
    cell(row, event.at.replace("T", " ").slice(0, 19));
    cell(row, event.event);
    cell(row, event.cause || "");
    cell(row, describe(event));
  }
}

function describe(event) {
  const details = event.details || {};
  if (event.event === "updated") {
    return Object.entries(details.changed || {})
      .map(([name, [before, after]]) => name + ": " + JSON.stringify(before) + " → " + JSON.stringify(after))
      .join("; ");
  }
  if (event.event === "accessed") return "returned " + event.count + " times that day";
  if (event.event === "merged") return "into " + details.into;
  if (event.event === "absorbed") return "merged into it: " + (details.merged || []).join(", ");
  if (event.event === "forgotten") return "rule " + JSON.stringify(details.rule);
  if (event.event === "replaced") return "by " + details.by;
  if (event.event === "deleted" && details.key) return "by key " + details.key;
  if (event.relevance !== undefined) return "relevance " + Number(event.relevance).toPrecision(4);
  return "";
}

async function save(event) {
  event.preventDefault();
  const tags = $("edit-tags").value.split(",").map((tag) => tag.trim()).filter(Boolean);
  const changes = {
    memory: $("edit-memory").value,
    category: $("edit-category").value,
    tags,
    relevance: Number($("edit-relevance").value),
  };
  try {
    await call("PATCH", "/api/memories/" + state.memory.id + scopeQuery(), changes);
    await openMemory(state.memory.id);
    say("Saved.");
  } catch (error) { say(error.message); }
}

async function remove() {
  if (!window.confirm("Delete this memory? Its history stays.")) return;
  try {
    await call("DELETE", "/api/memories/" + state.memory.id + scopeQuery());
    await openMemory(state.memory.id);
    await loadScopes();
  } catch (error) { say(error.message); }
}

function filterParams() {
  const params = new URLSearchParams();
  if (state.scope) params.set("scope", state.scope); else params.set("descendants", "1");
  if ($("category").value) params.set("category", $("category").value);
  if ($("tag").value.trim()) params.set("tag", $("tag").value.trim());
  for (const name of ["since", "until", "meta"]) {
    if ($(name).value.trim()) params.set(name, $(name).value.trim());
  }
  return params;
}

async function forget() {
  const params = filterParams();
  if (!["category", "tag", "since", "until", "meta"].some((name) => params.has(name))) {
    say("Choose a filter first: forgetting everything is not done from here.");
    return;
  }
  try {
    const preview = await call("GET", "/api/forget?" + params);
    const shown = preview.sample.map((memory) => "• " + memory.memory).join("\n");
    if (!window.confirm("Forget " + preview.count + " memories?\n" + shown)) return;
    params.set("confirm", String(preview.count));
    const done = await call("POST", "/api/forget?" + params);
    say("Forgot " + done.forgotten + " memories.");
    await loadScopes();
    await search();
  } catch (error) { say(error.message); }
}

function passParams() {
  const params = new URLSearchParams();
  if (state.scope) params.set("scope", state.scope);
  if ($("full").checked) params.set("full", "1");
  return params;
}

async function previewConsolidation() {
  try {
    const preview = await call("GET", "/api/consolidate?" + passParams());
    $("consolidation").hidden = false;
    const stats = preview.stats;
    $("consolidation-summary").textContent = stats.entries_before + " memories: " +
      stats.merged + " would be merged, " + stats.pruned + " pruned, " +
      stats.entries_after + " left.";
    const body = $("consolidation-items").tBodies[0];
    body.replaceChildren();
    for (const item of preview.merged) {
      const row = body.insertRow();
      cell(row, "merge");
      cell(row, item.memory.memory, "text");
      cell(row, "into “" + item.into.memory + "”");
    }
    for (const item of preview.pruned) {
      const row = body.insertRow();
      cell(row, "prune");
      cell(row, item.memory.memory, "text");
      cell(row, item.why);
    }
  } catch (error) { say(error.message); }
}

async function runConsolidation() {
  try {
    const done = await call("POST", "/api/consolidate?" + passParams());
    $("consolidation").hidden = true;
    say("Consolidated: " + done.stats.merged + " merged, " + done.stats.pruned + " pruned.");
    await loadScopes();
    await search();
  } catch (error) { say(error.message); }
}

function bars(svg, labels, values) {
  const width = 320, height = 120, gap = 4;
  const most = Math.max(1, ...values);
  const step = width / values.length;
  svg.setAttribute("viewBox", "0 0 " + width + " " + (height + 30));
  svg.replaceChildren();
  values.forEach((value, index) => {
    const tall = Math.round((value / most) * height);
    const bar = document.createElementNS("http://www.w3.org/2000/svg", "rect");
    bar.setAttribute("x", index * step + gap / 2);
    bar.setAttribute("y", height - tall);
    bar.setAttribute("width", step - gap);
    bar.setAttribute("height", tall);
    const title = document.createElementNS("http://www.w3.org/2000/svg", "title");
    title.textContent = labels[index] + ": " + value;
    bar.appendChild(title);
    const label = document.createElementNS("http://www.w3.org/2000/svg", "text");
    label.setAttribute("x", index * step + step / 2);
    label.setAttribute("y", height + 14);
    label.setAttribute("text-anchor", "middle");
    label.textContent = labels[index];
    svg.append(bar, label);
  });
}

async function loadStats() {
  const params = new URLSearchParams();
  if (state.scope) params.set("scope", state.scope); else params.set("descendants", "1");
  const stats = await call("GET", "/api/stats?" + params);
  const days = stats.created_per_day.slice(-60);
  bars($("per-day"), days.map(([day], index) => (index % 10 === 0 ? day.slice(5) : "")),
    days.map(([, number]) => number));
  const names = Object.keys(stats.by_category);
  bars($("by-category"), names.map((name) => name.slice(0, 5)), names.map((name) => stats.by_category[name]));
  bars($("relevance"), stats.relevance_histogram.map((_, index) => (index / 10).toFixed(1)),
    stats.relevance_histogram);
}

function scopeQuery() { return state.scope ? "?scope=" + encodeURIComponent(state.scope) : ""; }

document.addEventListener("DOMContentLoaded", () => {
  $("login").onsubmit = (event) => {
    event.preventDefault();
    sessionStorage.setItem("loopctl-memory-token", $("token").value);
    start();
  };
  $("search").onsubmit = search;
  $("edit").onsubmit = save;
  $("delete").onclick = remove;
  $("back").onclick = () => search();
  $("older").onclick = () => search(null, state.next);
  $("forget").onclick = forget;
  $("preview-consolidation").onclick = previewConsolidation;
  $("run-consolidation").onclick = runConsolidation;
  start();
});
