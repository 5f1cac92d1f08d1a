// The josefk console: polls api/cluster every POLL_MS and redraws the page.
// Every string from the cluster reaches the page through textContent or an attribute
// set with setAttribute: never through innerHTML (client ids and group ids are user input).
"use strict";

const POLL_MS = 2000;
const CHART_POINTS = 60;  // two minutes at one point per poll
const MAX_ROWS = 2000;  // partition rows drawn at most; the filters find the others
const SVG = "http://www.w3.org/2000/svg";

const state = { last: null, rates: [], prevTraffic: null, lastOk: null };

function $(id) { return document.getElementById(id); }

// el("td", {class: "num"}, "text", childNode, ...): an element; strings become text nodes.
function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value !== null && value !== undefined && value !== false) node.setAttribute(key, value);
  }
  for (const child of children) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function num(n) { return n === null || n === undefined ? "–" : n.toLocaleString("en-US"); }

function bytesPerSecond(rate) {
  const units = ["B/s", "KB/s", "MB/s", "GB/s"];
  let i = 0;
  while (rate >= 1000 && i < units.length - 1) { rate /= 1000; i++; }
  return (rate >= 100 || i === 0 ? rate.toFixed(0) : rate.toFixed(1)) + " " + units[i];
}

function setText(id, value) { $(id).textContent = value; }

// --- brokers --------------------------------------------------------------------------

function renderBrokers(data) {
  const cluster = data.cluster;
  const leaders = new Map(), replicas = new Map(), assigned = new Set();
  for (const topic of cluster.topics) {
    for (const p of topic.partitions) {
      leaders.set(p.leader, (leaders.get(p.leader) || 0) + 1);
      for (const r of p.replicas) {
        replicas.set(r, (replicas.get(r) || 0) + 1);
        assigned.add(r);
      }
    }
  }
  const live = new Set(cluster.brokers.map(b => b.id));
  const rows = cluster.brokers.map(b => [b.id, el("tr", {"data-broker": b.id},
    el("td", {class: "num"}, b.id),
    el("td", {}, `${b.host}:${b.port}`),
    el("td", {}, b.rack || "–"),
    el("td", {}, b.id === cluster.controller_id ? el("span", {class: "badge ctl"}, "controller") : null,
      b.id === data.broker_id ? el("span", {class: "badge self"}, "this page") : null),
    el("td", {class: "num"}, num(leaders.get(b.id) || 0)),
    el("td", {class: "num"}, num(replicas.get(b.id) || 0)))]);
  // Replicas on brokers Metadata no longer lists: dead, or cut off from ZooKeeper.
  for (const id of [...assigned].filter(id => !live.has(id))) {
    rows.push([id, el("tr", {"data-broker": id, class: "offline"},
      el("td", {class: "num"}, id), el("td", {}, "not registered"), el("td", {}, "–"),
      el("td", {}, el("span", {class: "badge bad"}, "down")),
      el("td", {class: "num"}, "0"), el("td", {class: "num"}, num(replicas.get(id))))]);
  }
  rows.sort((a, b) => a[0] - b[0]);
  $("brokers").tBodies[0].replaceChildren(...rows.map(([, row]) => row));
}

// --- topics -----------------------------------------------------------------------------

function replicaList(p) {
  const isr = new Set(p.isr), offline = new Set(p.offline_replicas);
  return p.replicas.map(r => {
    const cls = offline.has(r) ? "rep off" : isr.has(r) ? "rep in" : "rep out";
    return el("span", {class: r === p.leader ? cls + " leader" : cls,
      title: offline.has(r) ? "offline" : isr.has(r) ? "in sync" : "not in sync"}, r);
  });
}

function renderTopics(data) {
  const filter = $("filter").value.trim().toLowerCase();
  const onlyUrp = $("only-urp").checked, internal = $("show-internal").checked;
  const rows = [];
  let hidden = 0, cut = 0;
  for (const topic of data.cluster.topics) {
    const visible = (internal || !topic.internal) && topic.name.toLowerCase().includes(filter);
    let first = true;
    for (const p of topic.partitions) {
      const bad = p.offline || p.under_replicated;
      if (!visible || (onlyUrp && !bad)) { hidden++; continue; }
      if (rows.length >= MAX_ROWS) { cut++; continue; }
      const stateCell = p.offline ? el("span", {class: "badge bad"}, "offline")
        : p.under_replicated ? el("span", {class: "badge warn"}, "under-replicated")
        : el("span", {class: "badge ok"}, "ok");
      rows.push(el("tr", {"data-topic": topic.name, "data-partition": p.partition,
          class: p.offline ? "offline" : p.under_replicated ? "urp" : null},
        el("td", {class: first ? "topic" : "topic repeat"}, topic.name,
          topic.internal && first ? el("span", {class: "badge"}, "internal") : null),
        el("td", {class: "num"}, p.partition),
        el("td", {class: "num leader"}, p.leader < 0 ? "none" : p.leader),
        el("td", {class: "replicas"}, ...replicaList(p)),
        el("td", {class: "isr"}, p.isr.join(",")),
        el("td", {class: "state"}, stateCell)));
      first = false;
    }
  }
  $("partitions").tBodies[0].replaceChildren(...rows);
  setText("partitions-note", (hidden ? ` · ${plural(hidden, "partition")} hidden by the filters` : "")
    + (cut ? ` · ${plural(cut, "more partition")} not drawn: filter to see them` : ""));
}

// --- consumer groups --------------------------------------------------------------------

// The sum of the known lags; null when no partition's lag is known.
function groupLag(group) {
  const known = (group.offsets || []).filter(o => o.lag !== null && o.lag !== undefined);
  return known.length ? known.reduce((sum, o) => sum + o.lag, 0) : null;
}

function plural(n, word) { return `${num(n)} ${word}${n === 1 ? "" : "s"}`; }

function renderGroup(group) {
  const clients = new Map((group.members || []).map(m => [m.member_id, m]));
  const head = el("div", {class: "group-head"},
    el("span", {class: "group-id"}, group.group_id),
    el("span", {class: "badge"}, group.state || "?"),
    group.protocol ? el("span", {class: "meta"}, `${group.protocol_type} / ${group.protocol}`) : null,
    group.coordinator !== undefined ? el("span", {class: "meta"}, `coordinator ${group.coordinator}`) : null,
    el("span", {class: "meta"}, plural((group.members || []).length, "member")),
    el("span", {class: "meta lag-total"}, "total lag ", el("b", {}, num(groupLag(group)))),
    group.error ? el("span", {class: "badge bad"}, group.error) : null);
  const rows = (group.offsets || []).map(o => {
    const member = clients.get(o.member_id);
    return el("tr", {"data-topic": o.topic, "data-partition": o.partition,
        class: o.lag ? "lagging" : null},
      el("td", {}, o.topic), el("td", {class: "num"}, o.partition),
      el("td", {class: "num"}, num(o.committed)), el("td", {class: "num"}, num(o.log_end)),
      el("td", {class: "num lag"}, num(o.lag)),
      el("td", {class: "client", title: member ? member.client_id : null}, member ? member.client_id : "–"),
      el("td", {class: "host"}, member ? member.host : ""));
  });
  const table = rows.length ? el("table", {class: "offsets"},
    el("thead", {}, el("tr", {}, el("th", {}, "topic"), el("th", {class: "num"}, "partition"),
      el("th", {class: "num"}, "committed"), el("th", {class: "num"}, "log end"),
      el("th", {class: "num"}, "lag"), el("th", {}, "client id"), el("th", {}, "host"))),
    el("tbody", {}, ...rows)) : null;
  const members = (group.members || []).map(m => el("li", {"data-member": m.member_id},
    el("span", {class: "client"}, m.client_id), el("span", {class: "host"}, m.host),
    el("span", {class: "assigned"}, m.assignment && m.assignment.length
      ? m.assignment.map(([t, p]) => `${t}-${p}`).join(" ") : "no partitions")));
  return el("div", {class: "group", "data-group": group.group_id}, head,
    members.length ? el("ul", {class: "members"}, ...members) : null, table);
}

function renderGroups(data) {
  const groups = data.groups || [];
  $("groups").replaceChildren(...(groups.length ? groups.map(renderGroup)
    : [el("p", {class: "note"}, "no consumer groups")]));
}

// --- throughput -------------------------------------------------------------------------

function recordTraffic(traffic) {
  if (!traffic) return;
  const prev = state.prevTraffic;
  state.prevTraffic = traffic;
  if (!prev) return;
  const seconds = (traffic.time_ms - prev.time_ms) / 1000;
  const rateIn = (traffic.bytes_in - prev.bytes_in) / seconds;
  const rateOut = (traffic.bytes_out - prev.bytes_out) / seconds;
  if (!(seconds > 0) || rateIn < 0 || rateOut < 0) return;  // a restarted broker
  state.rates.push({in: rateIn, out: rateOut});
  if (state.rates.length > CHART_POINTS) state.rates.shift();
}

// The series as an SVG polyline (or, with area, a polygon closed along the bottom).
function series(values, max, cls, area) {
  const w = 480, h = 140, step = w / (CHART_POINTS - 1);
  const x0 = w - (values.length - 1) * step;
  const points = values.map((v, i) => `${(x0 + i * step).toFixed(1)},${(h - 4 - (v / max) * (h - 8)).toFixed(1)}`);
  if (area && points.length) points.push(`${w},${h}`, `${x0.toFixed(1)},${h}`);
  const shape = document.createElementNS(SVG, area ? "polygon" : "polyline");
  shape.setAttribute("points", points.join(" "));
  shape.setAttribute("class", cls);
  return shape;
}

function renderChart(data) {
  setText("traffic-broker", data.broker_id);
  const chart = $("chart");
  if (!data.traffic) {
    chart.replaceChildren();
    setText("chart-max", "no traffic metrics on this broker");
    return;
  }
  const rates = state.rates;
  const max = Math.max(1024, ...rates.map(r => Math.max(r.in, r.out))) * 1.1;
  const grid = [0.25, 0.5, 0.75].map(f => {
    const line = document.createElementNS(SVG, "line");
    for (const [k, v] of [["x1", 0], ["x2", 480], ["y1", 140 * f], ["y2", 140 * f]]) line.setAttribute(k, v);
    line.setAttribute("class", "grid");
    return line;
  });
  const rateIn = rates.map(r => r.in), rateOut = rates.map(r => r.out);
  chart.replaceChildren(...grid, series(rateIn, max, "in-area", true), series(rateIn, max, "in"),
    series(rateOut, max, "out"));
  const last = rates[rates.length - 1];
  setText("rate-in", last ? bytesPerSecond(last.in) : "–");
  setText("rate-out", last ? bytesPerSecond(last.out) : "–");
  setText("chart-max", "top " + bytesPerSecond(max));
}

// --- the page -----------------------------------------------------------------------------

function renderSummary(data) {
  const cluster = data.cluster;
  let partitions = 0, urp = 0, offline = 0;
  for (const t of cluster.topics) for (const p of t.partitions) {
    partitions++;
    if (p.offline) offline++; else if (p.under_replicated) urp++;
  }
  setText("cluster-id", cluster.cluster_id || "–");
  setText("controller-id", cluster.controller_id < 0 ? "none" : cluster.controller_id);
  setText("n-brokers", num(cluster.brokers.length));
  setText("n-topics", num(cluster.topics.filter(t => !t.internal).length));
  setText("n-partitions", num(partitions));
  setText("n-urp", num(urp));
  setText("n-offline", num(offline));
  $("tile-urp").classList.toggle("warn", urp > 0);
  $("tile-offline").classList.toggle("bad", offline > 0);
  setText("n-groups", num((data.groups || []).length));
  setText("n-lag", num((data.groups || []).reduce((s, g) => s + (groupLag(g) || 0), 0)));
}

function renderProblems(data) {
  const box = $("problems");
  const problems = data.errors || [];
  box.hidden = problems.length === 0;
  box.replaceChildren(el("b", {}, data.complete ? "Errors: " : "Partial view: "),
    ...problems.map(p => el("span", {class: "problem"}, p)));
}

function render(data) {
  setText("self-id", data.broker_id);
  renderProblems(data);
  renderChart(data);
  if (data.cluster) {
    renderSummary(data);
    renderBrokers(data);
    renderTopics(data);
  }
  renderGroups(data);
}

function setStatus(text, cls) {
  const status = $("status");
  status.textContent = text;
  status.className = "status " + cls;
}

async function poll() {
  try {
    const response = await fetch("api/cluster", {cache: "no-store", signal: AbortSignal.timeout(15000)});
    if (!response.ok) throw new Error(`HTTP ${response.status}`);
    const data = await response.json();
    recordTraffic(data.traffic);
    state.last = data;
    state.lastOk = new Date();
    render(data);
    setStatus(`updated ${state.lastOk.toLocaleTimeString()}`, data.complete ? "ok" : "warn");
  } catch (e) {
    const since = state.lastOk ? ` (last update ${state.lastOk.toLocaleTimeString()})` : "";
    setStatus(`unreachable: ${e.message}${since}`, "bad");
  } finally {
    setTimeout(poll, POLL_MS);
  }
}

for (const id of ["filter", "only-urp", "show-internal"]) {
  $(id).addEventListener("input", () => { if (state.last && state.last.cluster) renderTopics(state.last); });
}
poll();
