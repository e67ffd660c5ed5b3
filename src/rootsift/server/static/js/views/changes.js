// changes: the series with its change points (red) and the change events (grey, dashed)
// marked, then the change points, their suspects and what else moved.
import { call } from "../api.js";
import { prob } from "../findings.js";
import { controls, h, table } from "../form.js";
import { dataset, footer, state, status } from "../main.js";

const COLOURS = ["#2b66a8", "#2f855a", "#f7a94b", "#6b46c1", "#5cb8b2", "#8a6d3b"];
const num = (x) => (x == null ? "–" : (+(+x).toPrecision(4)).toLocaleString());

export async function changes(main) {
  main.append(h("h1", "Changes"));
  const name = dataset();
  if (!name) return;
  main.append(controls([
    { name: "measure", label: "measure", value: state.get("measure"), placeholder: "p50(duration_ms), count, rate(status >= 500)" , wide: true },
    { name: "by", label: "by", value: state.get("by"), placeholder: "host" },
    { name: "changes", label: "change events (dataset)", value: state.get("changes") },
    { name: "where", label: "where", value: state.get("where"), wide: true },
    { name: "from", label: "from", value: state.get("from") },
    { name: "to", label: "to", value: state.get("to") },
  ], "Find changes", (v) => state.set({ ...v, run: "1" })));
  const body = { dataset: name, measure: state.get("measure"), by: state.get("by"), changes: state.get("changes"),
    where: state.get("where"), from: state.get("from"), to: state.get("to") };
  footer("changes", body);
  if (!state.get("run")) {
    main.append(h("p", "When each series shifted, and which change came right before.", "muted"));
    return;
  }
  status("looking for change points…");
  const r = await call("changes", body);
  const points = r.findings.filter((f) => f.kind === "changepoint");
  status(r.warnings.length ? r.warnings.join("; ") : `${points.length} change point(s), buckets of ${r.granularity}`);
  if (r.series.length) main.append(chart(r, points));
  const rows = r.findings.map((f) => {
    if (f.kind === "changepoint") return [f.kind, f.series, f.time, `${num(f.before)} → ${num(f.after)}`, prob(f.q_value), f.suspects.join(", ")];
    if (f.kind === "suspect") return [f.kind, f.event, f.time, `${f.relation}, ${f.lead} before${f.in_scope ? ", in scope" : ""}`, prob(f.p_value), f.series];
    return [f.kind, f.series, f.time, `${num(f.before)} → ${num(f.after)}`, f.p_value != null ? prob(f.p_value) : "–", ""];
  });
  main.append(table(["kind", "what", "time", "change", "p/q", "suspects / series"], rows));
}

function chart(r, points) {
  const div = h("div");
  const shown = r.series.slice(0, COLOURS.length);
  const times = [...new Set(shown.flatMap((s) => s.times))].sort();
  const index = new Map(times.map((t, i) => [t, i]));
  const data = [times.map((t) => Date.parse(t) / 1000)];
  for (const s of shown) {
    const col = new Array(times.length).fill(null);
    s.times.forEach((t, i) => { col[index.get(t)] = s.values[i]; });
    data.push(col);
  }
  const marks = points.map((p) => Date.parse(p.time) / 1000);
  const events = (r.events || []).map((t) => Date.parse(t) / 1000);
  const width = Math.max(480, Math.min(document.getElementById("main").clientWidth - 20, 1200));
  const line = (u, x, colour, dash) => {
    const px = Math.round(u.valToPos(x, "x", true));
    if (px < u.bbox.left || px > u.bbox.left + u.bbox.width) return;
    const g = u.ctx;
    g.save(); g.strokeStyle = colour; g.lineWidth = 1.5; g.setLineDash(dash);
    g.beginPath(); g.moveTo(px, u.bbox.top); g.lineTo(px, u.bbox.top + u.bbox.height); g.stroke(); g.restore();
  };
  new uPlot({
    width, height: 300, title: `${r.measure}${r.by ? ` by ${r.by}` : ""}: change points (red), change events (grey)`,
    tzDate: (ts) => uPlot.tzDate(new Date(ts * 1e3), "Etc/UTC"),
    axes: [{ label: "time (UTC)" }, { label: r.measure }],
    series: [{ label: "time (UTC)" }, ...shown.map((s, i) => ({ label: s.group == null ? r.measure : String(s.group), stroke: COLOURS[i], width: 1.2 }))],
    hooks: { draw: [(u) => { events.forEach((x) => line(u, x, "#98a2b3", [4, 4])); marks.forEach((x) => line(u, x, "#d7263d", [])); }] },
  }, data, div);
  return div;
}
