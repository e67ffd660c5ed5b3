// The heatmap of a measure; drag a box and explain it against the rest of the range,
// the findings beside it. A finding becomes a filter (here) or a breakdown (in Query).
import { call } from "../api.js";
import { renderFindings } from "../findings.js";
import { controls, h } from "../form.js";
import { Heatmap } from "../heatmap.js";
import { allDatasets, dataset, footer, state, status } from "../main.js";

const SAMPLED_FROM = 2_000_000;
/** Past this many events a box is explained from the store's 1-in-64 uniform sample
(explain --sampled: the box's events read exactly, the rest estimated, the error stated),
so findings come back within a couple of seconds at 10M events. */
import { iso } from "../time.js";

export async function measureField(name) {
  const schema = await call("schema", { dataset: name });
  const numeric = schema.fields.filter((f) => /int|double|float|decimal|real|bigint/i.test(f.type) && f.field !== "timestamp");
  const named = numeric.find((f) => /duration|latency|elapsed|_ms$|time_ms|query_time/i.test(f.field));
  return { fields: numeric.map((f) => f.field), guess: (named || numeric[0] || {}).field || "" };
}

export function explainBody() {
  const field = state.get("field");
  const lo = state.get("lo"), hi = state.get("hi");
  return {
    dataset: dataset(), from: state.get("from"), to: state.get("to"), where: state.get("where"),
    select: lo && hi ? `${field} >= ${lo} and ${field} < ${hi}` : "",
    "select-from": state.get("sf"), "select-to": state.get("st"),
    sampled: ((allDatasets().find((d) => d.name === dataset()) || {}).events || 0) >= SAMPLED_FROM,
  };
}

export async function heatmapView(main) {
  main.append(h("h1", "Heatmap"));
  const name = dataset();
  if (!name) return;
  const { fields, guess } = await measureField(name);
  const field = state.get("field") || guess;
  if (!field) { status("this dataset has no numeric field to draw", true); return; }
  main.append(controls([
    { name: "field", label: "field", value: field, options: fields },
    { name: "from", label: "from", value: state.get("from"), placeholder: "-2h" },
    { name: "to", label: "to", value: state.get("to") },
    { name: "where", label: "where", value: state.get("where"), wide: true },
    { name: "sf", label: "box from", value: state.get("sf") },
    { name: "st", label: "box to", value: state.get("st") },
    { name: "lo", label: "box min value", value: state.get("lo") },
    { name: "hi", label: "box max value", value: state.get("hi") },
  ], "Draw and explain", (v) => state.set(v)));
  const spec = { dataset: name, from: state.get("from"), to: state.get("to"), where: state.get("where"), calc: [`heatmap(${field})`] };
  footer("query", spec);
  const grid = h("div", "", "split");
  const left = h("div"), right = h("div");
  grid.append(left, right);
  main.append(grid);
  status("drawing…");
  const out = await call("query", spec);
  if (!out.heatmap || !out.heatmap.times.length) { status(`no events with a value of ${field}`); return; }
  const started = performance.now();
  const heat = new Heatmap(left, out.heatmap, {
    onSelect: (box) => state.set({
      sf: iso(box.from), st: iso(box.to), lo: +box.lo.toPrecision(4), hi: +box.hi.toPrecision(4), field,
    }),
  });
  document.body.dataset.heatmapMs = String(Math.round(performance.now() - started));
  const zoom = h("button", "Zoom to the box", "secondary");
  zoom.type = "button";
  zoom.disabled = !state.get("sf");
  zoom.addEventListener("click", () => state.set({ from: state.get("sf"), to: state.get("st"), sf: "", st: "", lo: "", hi: "" }));
  left.append(zoom, h("p", "Drag a box across the heatmap to explain it against the rest of the range.", "muted"));
  status(`${out.heatmap.times.length} columns of ${out.granularity} · ${out.heatmap.buckets.length} value buckets`);
  if (!state.get("sf") || !state.get("lo")) return;
  heat.show({ from: Date.parse(state.get("sf")), to: Date.parse(state.get("st")), lo: +state.get("lo"), hi: +state.get("hi") });
  const body = explainBody();
  footer("explain", body);
  right.append(h("h2", "What is different in the box"));
  const summary = h("p", "explaining…", "muted");
  const findings = h("ul");
  right.append(summary, findings);
  const t0 = performance.now();
  const result = await call("explain", body);
  document.body.dataset.explainMs = String(Math.round(performance.now() - t0));
  summary.textContent = `${result.selection.events.toLocaleString()} events in the box against ${result.baseline.events.toLocaleString()} in the rest${body.sampled ? " (from the store's 1-in-64 sample)" : ""}`;
  renderFindings(findings, result.findings, {
    onFilter: (cond) => state.set({ where: state.get("where") ? `${state.get("where")} and ${cond}` : cond, sf: "", st: "", lo: "", hi: "" }),
    onBreakdown: (f) => state.set({ view: "query", b: f, c: ["count"], g: "" }),
  });
}
