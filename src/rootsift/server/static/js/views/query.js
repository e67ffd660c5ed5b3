// The query builder: range, filter, breakdowns, calculations, granularity; a chart over
// time (drag across it to zoom the range) and the table.
import { call } from "../api.js";
import { controls, h, list, table } from "../form.js";
import { dataset, footer, state, status } from "../main.js";

const COLOURS = ["#2b66a8", "#d7263d", "#2f855a", "#f7a94b", "#6b46c1", "#5cb8b2", "#8a6d3b", "#e3799d"];

export function body() {
  return {
    dataset: dataset(), from: state.get("from"), to: state.get("to"), where: state.all("where"),
    breakdown: state.all("b"), calc: state.all("c").length ? state.all("c") : ["count"], granularity: state.get("g"),
  };
}

export async function query(main) {
  main.append(h("h1", "Query"));
  const b = body();
  main.append(controls([
    { name: "from", label: "from", value: b.from, placeholder: "-2h or 2026-01-01T00:00Z" },
    { name: "to", label: "to", value: b.to, placeholder: "now" },
    { name: "where", label: "where", value: b.where.join(" and "), wide: true, placeholder: 'status >= 500 and endpoint = "/cart"' },
    { name: "b", label: "break down by (comma-separated)", value: b.breakdown.join(", ") },
    { name: "c", label: "calculations", value: b.calc.join(", "), wide: true, placeholder: "count, p99(duration_ms)" },
    { name: "g", label: "granularity", value: b.granularity, placeholder: "1m (omit for totals)" },
  ], "Run", (v) => state.set({ from: v.from, to: v.to, where: v.where, b: list(v.b), c: list(v.c), g: v.g })));
  footer("query", b);
  if (!b.dataset) return;
  status("running…");
  const out = await call("query", b);
  status(out.warnings && out.warnings.length ? out.warnings.join("; ") : `${out.rows.length.toLocaleString()} rows · ${out.start || "first event"} → ${out.end || "last event"}`);
  if (out.granularity && out.columns[0] === "time") main.append(chart(out));
  main.append(table(out.columns, out.rows, (i) => i >= 1 + out.query.breakdowns.length || (i === 0 && out.columns[0] !== "time")));
}

function chart(out) {
  const div = h("div");
  const nb = out.query.breakdowns.length;
  const calc = out.columns[1 + nb];
  const times = [...new Set(out.rows.map((r) => r[0]))].sort();
  const index = new Map(times.map((t, i) => [t, i]));
  const groups = new Map();
  for (const r of out.rows) {
    const key = nb ? r.slice(1, 1 + nb).join(" · ") : calc;
    if (!groups.has(key)) groups.set(key, new Array(times.length).fill(null));
    groups.get(key)[index.get(r[0])] = r[1 + nb];
  }
  const top = [...groups.entries()].sort((a, b) => sum(b[1]) - sum(a[1])).slice(0, COLOURS.length);
  const data = [times.map((t) => Date.parse(t) / 1000), ...top.map(([, v]) => v)];
  const width = Math.max(480, Math.min(document.getElementById("main").clientWidth - 20, 1200));
  const opts = {
    width, height: 300, title: nb ? `${calc} by ${out.query.breakdowns.join(", ")}` : calc,
    tzDate: (ts) => uPlot.tzDate(new Date(ts * 1e3), "Etc/UTC"),
    series: [{ label: "time (UTC)" }, ...top.map(([k], i) => ({ label: k, stroke: COLOURS[i], width: 1.5, spanGaps: false }))],
    axes: [{ label: "time (UTC)" }, { label: calc }],
    cursor: { drag: { x: true, y: false } },
    hooks: { setSelect: [(u) => {
      if (u.select.width < 5) return;
      const a = u.posToVal(u.select.left, "x"), b = u.posToVal(u.select.left + u.select.width, "x");
      state.set({ from: new Date(a * 1000).toISOString(), to: new Date(b * 1000).toISOString() });
    }] },
  };
  new uPlot(opts, data, div);
  div.append(h("p", "Drag across the chart to zoom into that time range.", "muted"));
  return div;
}

function sum(values) { return values.reduce((a, v) => a + (v || 0), 0); }
