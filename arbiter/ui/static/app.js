// Arbiter's web view: the graph of a tenant's memory, read through the local
// `arbiter ui` server (api/graph, api/entry/ID, api/recall). User text only
// ever reaches the page as textContent, never as HTML.
"use strict";

const PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b",
                 "#e377c2", "#17becf", "#bcbd22", "#393b79", "#637939", "#843c39"];
const GREY = "#a0a7b0";
// Asserted links in greys, derived ones (associations) dashed in a colour per kind.
const LINKS = {
  relation: { colour: "#57606a", name: "relations" },
  reply: { colour: "#c8ccd0", name: "replies" },
  temporal: { colour: "#bf8700", name: "close in time", dash: [2, 2] },
  entity: { colour: "#8250df", name: "same entity", dash: [2, 2] },
  similarity: { colour: "#1a7f37", name: "similar words", dash: [2, 2] },
};
// Labels are drawn 11 px high whatever the zoom; below this zoom the nodes are too close for labels to read (only
// hits and the selected node keep theirs), and derived links, one or more an entry, are a tangle that also tripled
// the layout's time to settle at 2,000 entries (docs/benchmarks.md): both show from this zoom in.
const READABLE_ZOOM = 1.5;
const LABEL_CHARS = 32;
const NARROW = window.matchMedia("(max-width: 700px)");
const state = { data: null, asOf: null, view: "entries", hits: new Set(), query: "", selected: null, graph: null,
                positions: new Map(), hidden: new Set(), zoom: 1 };
// What tests and the bench read: counts, when the first frame with the data was drawn, the labels of the last frame.
window.arbiter = { nodes: 0, edges: 0, associations: 0, loads: 0, renderedAt: null, settled: false, graph: null,
                   labels: [], highlighted: [] };

const $ = (id) => document.getElementById(id);

function el(tag, attrs = {}, ...kids) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "onclick") node.addEventListener("click", v);
    else if (k === "style") node.setAttribute("style", v);
    else node[k] = v;
  }
  for (const kid of kids) if (kid != null) node.append(kid);
  return node;
}

function colour(cluster) {
  return cluster == null ? GREY : PALETTE[cluster % PALETTE.length];
}

async function api(path) {
  const response = await fetch(path);
  const body = await response.json();
  if (!response.ok) throw new Error(body.error ? body.error.message : response.statusText);
  return body;
}

function status(text, isError = false) {
  $("status").textContent = text;
  $("status").className = isError ? "error" : "";
}

function day(text) {
  return text ? text.slice(0, 10) : "";
}

// ---- loading ------------------------------------------------------------------

async function load() {
  const params = new URLSearchParams({ view: state.view });
  if (state.asOf) params.set("as_of", state.asOf);
  status("loading…");
  try {
    state.data = await api("api/graph?" + params);
  } catch (e) {
    status(e.message, true);
    return;
  }
  const d = state.data;
  const what = d.view === "entities" ? "entities" : "entries";
  if (!d.nodes.length) {
    // Say why the page is blank, and never ask to click a node that is not there.
    status(state.asOf ? `no ${what} as of then` : d.view === "entities" ? "no entities named yet"
      : "nothing remembered yet: the graph fills as you or your agents remember");
    if (state.selected == null) $("detail").replaceChildren();
  } else {
    // The verb returns the newest: say so, or a reader takes them for the first.
    status(`${d.nodes.length} ${what}, ${d.edges.length} links` +
      (d.truncated ? ` (the newest ${d.nodes.length} ${what}; older ones are not drawn)` : ""));
    if (state.selected == null && !$("detail").children.length) showHint();
  }
  window.arbiter.nodes = d.nodes.length;
  window.arbiter.edges = d.edges.length;
  window.arbiter.associations = d.associations.length;
  renderLegend();
  render();
  // What the reader had open follows the view and the slider: the search is run again as of the new time, and the
  // open entry is shown as it stood then.
  if (state.query) await search(state.query, { reveal: false });
  if (state.selected != null && d.view === "entries") await select(state.selected, { reveal: false });
  else if (state.selected != null && !d.nodes.some((n) => n.id === state.selected)) {
    state.selected = window.arbiter.selected = null;  // an entity not known at the new time
    showHint();
  }
  window.arbiter.loads += 1;
}

function showHint() {
  $("detail").replaceChildren(el("p", { className: "hint" },
    state.view === "entities" ? "Click a node to read about the entity." : "Click a node to read the entry."));
}

function render() {
  if (NARROW.matches) renderLists();
  else renderGraph();
}

// ---- the graph ----------------------------------------------------------------

// A d3-style force pulling each node toward its topic's centroid, so topics
// read as regions even where no relation joins their entries.
function clusterForce(strength = 0.08) {
  let nodes = [];
  function force(alpha) {
    const sums = new Map();
    for (const n of nodes) {
      if (n.cluster == null) continue;
      const s = sums.get(n.cluster) || { x: 0, y: 0, k: 0 };
      s.x += n.x; s.y += n.y; s.k += 1;
      sums.set(n.cluster, s);
    }
    for (const n of nodes) {
      const s = n.cluster == null ? null : sums.get(n.cluster);
      if (!s) continue;
      n.vx += (s.x / s.k - n.x) * strength * alpha;
      n.vy += (s.y / s.k - n.y) * strength * alpha;
    }
  }
  force.initialize = (ns) => { nodes = ns; };
  return force;
}

function renderGraph() {
  const d = state.data;
  if (!d) return;
  // Keep where nodes were, so moving the time slider does not scatter the drawing.
  if (state.graph && state.drawnView === d.view) {
    for (const n of state.graph.graphData().nodes) state.positions.set(n.id, [n.x, n.y]);
  }
  state.drawnView = d.view;
  const nodes = d.nodes.map((n) => {
    const at = state.positions.get(n.id);
    return at ? { ...n, x: at[0], y: at[1] } : { ...n };
  });
  // Derived links are drawn but pull nothing: the layout stays the topics' and the asserted links', and a bulk
  // load's one-instant chain of "close in time" does not string the drawing out into a line.
  const degree = new Map();
  for (const e of d.edges) for (const id of [e.source, e.target]) degree.set(id, (degree.get(id) || 0) + 1);
  const links = [
    ...d.edges.map((e) => ({ source: e.source, target: e.target, kind: e.relation === "reply" ? "reply" : "relation",
      label: e.relation, strength: 1 / Math.min(degree.get(e.source), degree.get(e.target)) })),
    ...d.associations.map((a) => ({ source: a.source, target: a.target, kind: a.kind,
      label: `${LINKS[a.kind].name}: ${a.evidence}`, strength: 0 })),
  ];
  window.arbiter.settled = false;
  window.arbiter.renderedAt = null;
  if (!state.graph) {
    const box = $("graph");
    state.graph = ForceGraph()(box)
      .width(box.clientWidth)
      .height(box.clientHeight)
      .nodeId("id")
      // force-graph puts a string label into its tooltip as HTML: hand it an element holding text.
      .nodeLabel((n) => el("span", {}, `#${n.id} ${n.title}`))
      .nodeColor((n) => (state.hits.size && !state.hits.has(n.id) ? colour(n.cluster) + "40" : colour(n.cluster)))
      .nodeRelSize(4)
      .linkColor((l) => LINKS[l.kind].colour + (LINKS[l.kind].dash ? "99" : ""))  // derived: fainter
      .linkWidth((l) => (LINKS[l.kind].dash ? 0.75 : 1))
      .linkLineDash((l) => LINKS[l.kind].dash || null)
      .linkVisibility((l) => !state.hidden.has(l.kind) && (!LINKS[l.kind].dash || state.zoom >= READABLE_ZOOM))
      .linkDirectionalArrowLength((l) => (l.kind === "relation" ? 3 : 0))
      .linkLabel((l) => el("span", {}, l.label))
      .cooldownTicks(120)
      .nodeCanvasObjectMode(() => "after")
      .nodeCanvasObject(drawRing)
      .onNodeClick((n) => (state.data.view === "entities" ? selectEntity(n.title) : select(n.id)))
      .onRenderFramePre((ctx, scale) => { state.zoom = scale; })
      .onRenderFramePost((ctx, scale) => {
        drawLabels(ctx, scale);
        if (window.arbiter.renderedAt === null && state.graph && state.graph.graphData().nodes.length)
          window.arbiter.renderedAt = performance.now();
      })
      .onEngineStop(() => {
        if (!state.fitted) state.graph.zoomToFit(0, 30);  // once: later loads keep the reader's zoom
        state.fitted = true;
        window.arbiter.settled = true;
      })
      .d3Force("cluster", clusterForce());
    state.graph.d3Force("link").strength((l) => l.strength);
    window.arbiter.graph = state.graph;
    window.addEventListener("resize", () => {
      if (!NARROW.matches) state.graph.width(box.clientWidth).height(box.clientHeight);
    });
  }
  state.graph.graphData({ nodes, links });
}

function drawRing(n, ctx) {
  const selected = state.selected === n.id;
  if (!selected && !state.hits.has(n.id)) return;
  ctx.beginPath();
  ctx.arc(n.x, n.y, selected ? 7 : 6, 0, 2 * Math.PI);
  ctx.strokeStyle = selected ? "#000" : "#cf222e";
  ctx.lineWidth = 1.5;
  ctx.stroke();
}

// Labels go on top of the whole frame, the selected node's and the hits' first, then the rest where they fit:
// one that would overlap a label already drawn is left out (hover still names it), and so is one off screen.
function drawLabels(ctx, scale) {
  const labels = (window.arbiter.labels = []);
  if (!state.graph || (scale < READABLE_ZOOM && !state.hits.size && state.selected == null)) return;
  const m = ctx.getTransform().inverse();
  const a = m.transformPoint(new DOMPoint(0, 0)), b = m.transformPoint(new DOMPoint(ctx.canvas.width, ctx.canvas.height));
  const rank = (n) => (state.selected === n.id ? 0 : state.hits.has(n.id) ? 1 : 2);
  const nodes = state.graph.graphData().nodes.filter((n) => (scale >= READABLE_ZOOM || rank(n) < 2) &&
    n.x >= a.x && n.x <= b.x && n.y >= a.y && n.y <= b.y);
  nodes.sort((p, q) => rank(p) - rank(q));
  const cell = 40, grid = new Map(), size = 11 / scale, high = 14 / scale;
  ctx.textAlign = "center";
  ctx.textBaseline = "top";
  ctx.lineWidth = 3 / scale;
  ctx.strokeStyle = "rgba(255,255,255,0.85)";  // a halo keeps a label legible over the lines it crosses
  for (const n of nodes) {
    const text = n.title.length > LABEL_CHARS ? n.title.slice(0, LABEL_CHARS - 1) + "…" : n.title;
    ctx.font = `${rank(n) < 2 ? "600 " : ""}${size}px system-ui, sans-serif`;
    const half = ctx.measureText(text).width / 2, top = n.y + 9.5;  // below the selection ring
    // The box in screen pixels, and the grid cells it covers.
    const box = [(n.x - half) * scale, top * scale, (n.x + half) * scale, (top + high) * scale];
    const keys = [];
    for (let x = Math.floor(box[0] / cell); x <= Math.floor(box[2] / cell); x++)
      for (let y = Math.floor(box[1] / cell); y <= Math.floor(box[3] / cell); y++) keys.push(`${x},${y}`);
    const clash = keys.some((k) => (grid.get(k) || []).some((o) =>
      o[0] < box[2] && box[0] < o[2] && o[1] < box[3] && box[1] < o[3]));
    if (clash) continue;
    for (const k of keys) grid.set(k, [...(grid.get(k) || []), box]);
    ctx.strokeText(text, n.x, top);
    ctx.fillStyle = state.hits.has(n.id) ? "#cf222e" : "#1f2328";
    ctx.fillText(text, n.x, top);
    labels.push(n.title);
  }
}

// ---- the cluster-and-list view (small screens) -----------------------------------

function renderLists() {
  const d = state.data;
  if (!d) return;
  const groups = d.clusters.map((c, i) => ({ name: c.name, cluster: i, entries: [] }));
  const other = { name: "Other entries", cluster: null, entries: [] };
  for (const n of d.nodes) (n.cluster == null ? other : groups[n.cluster]).entries.push(n);
  const box = $("lists");
  box.replaceChildren();
  for (const g of [...groups, other]) {
    if (!g.entries.length) continue;
    box.append(el("h2", { className: "cluster" },
      el("span", { className: "swatch", style: `background:${colour(g.cluster)}` }), " ", `${g.name} (${g.entries.length})`));
    box.append(el("ul", {}, ...g.entries.map((n) => el("li", {},
      el("button", { className: "link" + (state.hits.has(n.id) ? " hit" : ""),
        onclick: () => (d.view === "entities" ? selectEntity(n.title) : select(n.id)) },
        d.view === "entities" ? `${n.title} (${n.type})` : `#${n.id} ${n.title}`)))));
  }
  window.arbiter.renderedAt = performance.now();
  window.arbiter.settled = true;
}

// ---- legend, search, detail ---------------------------------------------------

function renderLegend() {
  const d = state.data;
  const sizes = new Map();
  for (const n of d.nodes) sizes.set(n.cluster, (sizes.get(n.cluster) || 0) + 1);
  const items = d.clusters.map((c, i) => el("li", {
    title: c.description, onclick: () => highlight(new Set(d.nodes.filter((n) => n.cluster === i).map((n) => n.id))),
  }, el("span", { className: "swatch", style: `background:${colour(i)}` }), el("span", { className: "name" }, c.name),
     el("span", { className: "count" }, String(sizes.get(i) || 0))));
  if (sizes.get(null)) items.push(el("li", {}, el("span", { className: "swatch", style: `background:${GREY}` }),
    el("span", { className: "name" }, "in no topic"), el("span", { className: "count" }, String(sizes.get(null)))));
  const counts = new Map();
  for (const e of d.edges) { const k = e.relation === "reply" ? "reply" : "relation"; counts.set(k, (counts.get(k) || 0) + 1); }
  for (const a of d.associations) counts.set(a.kind, (counts.get(a.kind) || 0) + 1);
  // Click a kind to hide its links (derived ones can crowd a drawing), again to show them.
  const kinds = Object.entries(LINKS).filter(([k]) => counts.get(k)).map(([k, v]) => el("li", {
    className: "link-kind" + (state.hidden.has(k) ? " off" : ""),
    title: "show or hide these links" + (v.dash ? " (drawn once zoomed in far enough to read labels)" : ""),
    onclick: () => {
      if (!state.hidden.delete(k)) state.hidden.add(k);
      renderLegend();
      if (state.graph) state.graph.linkVisibility(state.graph.linkVisibility());
    },
  }, el("span", { className: "line" + (v.dash ? " dashed" : ""), style: `border-color:${v.colour}` }),
     el("span", { className: "name" }, v.name), el("span", { className: "count" }, String(counts.get(k)))));
  $("legend").replaceChildren(el("h2", {}, "Topics"), el("ul", { id: "topics" }, ...items),
    ...(kinds.length ? [el("h2", {}, "Links"), el("ul", { id: "link-kinds" }, ...kinds)] : []));
}

function highlight(ids) {
  state.hits = ids;
  window.arbiter.highlighted = [...ids];
  if (NARROW.matches) renderLists();
  else if (state.graph) state.graph.nodeColor(state.graph.nodeColor());  // repaint with the new dimming
}

// Bring what was just shown to where the reader is looking: on a phone the side panel is a sheet over the list.
// On a wide screen it is scrolled just into the side panel, the legend left in place where it fits.
function reveal(node) {
  if (NARROW.matches) $("side").classList.add("open");
  (node.firstElementChild || node).scrollIntoView({ block: NARROW.matches ? "start" : "nearest" });
}

async function search(query, { reveal: show = true } = {}) {
  state.query = query.trim();
  if (!state.query) {
    $("hits").replaceChildren();
    highlight(new Set());
    return;
  }
  const params = new URLSearchParams({ q: query });
  if (state.asOf) params.set("as_of", state.asOf);
  let result;
  try {
    result = await api("api/recall?" + params);
  } catch (e) {
    status(e.message, true);
    return;
  }
  const drawn = new Set(state.data.nodes.map((n) => n.id));
  // recall's note says why nothing was searched or found ("no searchable word..."): a bare "0 hits" does not.
  $("hits").replaceChildren(el("h2", {}, `Recall: ${result.hits.length} hit${result.hits.length === 1 ? "" : "s"}`, state.asOf ? ` as of ${day(state.asOf)}` : ""),
    ...(result.note ? [el("p", { className: "hint", id: "recall-note" }, result.note)] : []),
    el("ul", {}, ...result.hits.map((h) =>
      el("li", {}, el("button", { className: "link hit", onclick: () => select(h.id) },
        `#${h.id} ${h.title}` + (drawn.has(h.id) || state.view !== "entries" ? "" : " (not drawn)"))))));
  // Hits are entries: in the entities view they are listed, not drawn (entity ids are other numbers).
  highlight(state.view === "entries" ? new Set(result.hits.map((h) => h.id)) : new Set());
  window.arbiter.hits = result.hits.length;
  if (show) reveal($("hits"));
}

function section(title, items) {
  return items.length ? [el("h2", {}, title), el("ul", {}, ...items)] : [];
}

function entryButton(id, text) {
  return el("li", {}, el("button", { className: "link", onclick: () => select(id) }, text));
}

async function select(id, { reveal: show = true } = {}) {
  state.selected = state.view === "entries" ? id : null;
  if (state.graph) state.graph.nodeColor(state.graph.nodeColor());
  const query = state.asOf ? "?as_of=" + encodeURIComponent(state.asOf) : "";
  let d;
  try {
    d = await api(`api/entry/${id}` + query);
  } catch (e) {
    $("detail").replaceChildren(el("p", { className: "error" }, e.message));
    return;
  }
  const e = d.entry;
  const times = [
    `valid ${day(e.valid_from)} → ${e.valid_to ? day(e.valid_to) : "now"}`,
    `recorded ${e.recorded_at.replace("T", " ").slice(0, 19)}`,
  ];
  if (e.known_from) times.push(`known ${day(e.known_from)} → ${e.known_to ? day(e.known_to) : "now"}`);
  const history = d.history.entries.filter((h) => h.id !== e.id).map((h) =>
    entryButton(h.id, `#${h.id} ${h.title} (${day(h.valid_from)}${h.valid_to ? " → " + day(h.valid_to) : ""})`));
  const backlinks = d.backlinks.links.map((b) => entryButton(b.entry.id, `${b.kind}: #${b.entry.id} ${b.entry.title}`));
  $("detail").replaceChildren(
    el("h3", { id: "entry-title" }, e.title),
    el("p", { className: "meta", id: "entry-who" }, `#${e.id} · ${e.type}` + (e.author ? ` · by ${e.author}` : "") +
      (e.team ? ` · shared with ${e.team}` : " · private") +
      (e.source ? ` · ${e.source}` : "") + (d.visible ? "" : " · not visible at this time")),
    el("p", { className: "meta" }, times.join(" · ")),
    el("div", {}, ...e.tags.map((t) => el("span", { className: "tag" }, t))),
    el("p", { className: "content" }, e.content),
    ...section("History", history),
    ...section("Backlinks", backlinks),
  );
  window.arbiter.selected = id;
  if (show) reveal($("detail"));
}

async function selectEntity(name) {
  let d;
  try {
    d = await api("api/entity?" + new URLSearchParams({ name }));
  } catch (e) {
    $("detail").replaceChildren(el("p", { className: "error" }, e.message));
    return;
  }
  const n = d.entity;
  const relations = d.relations.map((r) => el("li", {}, `${r.source.name} ${r.relation} ${r.target.name}`));
  $("detail").replaceChildren(
    el("h3", { id: "entry-title" }, n.name),
    el("p", { className: "meta" }, `${n.type} · mentioned in ${n.mentions} entries` +
      (n.aliases.length ? ` · also ${n.aliases.join(", ")}` : "")),
    ...section("Mentioned in", d.entries.map((e) => entryButton(e.id, `#${e.id} ${e.title}`))),
    ...section("Relations", relations),
  );
  state.selected = n.id;
  if (state.graph) state.graph.nodeColor(state.graph.nodeColor());
  window.arbiter.selected = n.id;
  reveal($("detail"));
}

// ---- time ---------------------------------------------------------------------

function sliderTime(value) {
  const start = Date.parse(state.data && state.data.earliest ? state.data.earliest : new Date().toISOString());
  const end = Date.now();
  return new Date(start + ((end - start) * value) / 1000);
}

$("time").addEventListener("input", (ev) => {
  const v = Number(ev.target.value);
  $("time-label").textContent = v >= 1000 ? "now" : sliderTime(v).toISOString().slice(0, 16).replace("T", " ");
});
$("time").addEventListener("change", (ev) => {
  const v = Number(ev.target.value);
  state.asOf = v >= 1000 ? null : sliderTime(v).toISOString();
  load();
});
$("view").addEventListener("change", (ev) => {
  state.view = ev.target.value;
  // Entries and entities share id numbers: never carry a position, a selection or a highlight across views.
  state.positions.clear();
  state.hits = new Set();
  state.selected = null;
  window.arbiter.selected = null;
  showHint();
  state.fitted = false;
  load();
});
$("close").addEventListener("click", () => $("side").classList.remove("open"));
$("search").addEventListener("submit", (ev) => {
  ev.preventDefault();
  search($("q").value);
});
NARROW.addEventListener("change", render);

// Who the page reads as: it shows only what this user sees.
api("api/whoami").then((w) => {
  $("who").textContent = `${w.user}` + (w.teams.length ? ` · ${w.teams.join(", ")}` : "");
  window.arbiter.user = w.user;
}).catch((e) => status(e.message, true));
load();
