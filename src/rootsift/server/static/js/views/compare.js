import { call } from "../api.js";
import { controls, h, table } from "../form.js";
import { dataset, footer, state, status } from "../main.js";

export async function compare(main) {
  main.append(h("h1", "Compare"));
  const name = dataset();
  if (!name) return;
  main.append(controls([
    { name: "a", label: "cohort A (baseline)", value: state.get("a"), wide: true, placeholder: 'version = "1.4"' },
    { name: "bb", label: "cohort B", value: state.get("bb"), wide: true, placeholder: 'version = "1.5"' },
    { name: "metrics", label: "metrics", value: state.get("metrics"), wide: true, placeholder: "p50(duration_ms),p99(duration_ms)" },
    { name: "where", label: "where", value: state.get("where") },
  ], "Compare", (v) => state.set(v)));
  const body = { dataset: name, a: state.get("a"), b: state.get("bb"), metrics: state.get("metrics"), where: state.get("where") };
  footer("compare", body);
  if (!body.a || !body.b) { main.append(h("p", "Give two cohorts as filters.", "muted")); return; }
  status("comparing…");
  const r = await call("compare", body);
  status(`verdict: ${r.verdict}`);
  const cell = (m) => { const s = h("span", m.verdict, `verdict-${m.verdict}`); return s; };
  const fmt = (x) => (x == null ? "–" : +(+x).toPrecision(4));
  main.append(table(
    ["metric", "A", "B", "change", "interval", "verdict", "better"],
    r.metrics.map((m) => [m.metric, fmt(m.a), fmt(m.b), m.relative_change == null ? "–" : `${(100 * m.relative_change).toFixed(1)} %`,
      m.ci ? `${(100 * m.ci[0]).toFixed(1)} … ${(100 * m.ci[1]).toFixed(1)} %` : "–", cell(m), m.better]),
    (i) => i >= 1 && i <= 4,
  ));
  const curved = r.metrics.find((m) => m.curve && m.curve.length > 1);
  if (curved) main.append(curve(curved));
}

/** The change at each quantile with its interval: where in the distribution B differs. */
function curve(m) {
  const div = h("div");
  const pts = m.curve.filter((c) => c.ci);
  const x = pts.map((c) => c.q * 100);
  const data = [x, pts.map((c) => 100 * c.relative_change), pts.map((c) => 100 * c.ci[0]), pts.map((c) => 100 * c.ci[1])];
  const width = Math.max(420, Math.min(document.getElementById("main").clientWidth - 20, 900));
  new uPlot({
    width, height: 260, title: `${m.field}: B against A at each quantile (change %, with its interval)`,
    scales: { x: { time: false } },
    axes: [{ label: "quantile (%)" }, { label: "change (%)" }],
    series: [{ label: "quantile" }, { label: "change %", stroke: "#d7263d", width: 2 },
      { label: "interval low", stroke: "#8aa4c8", dash: [4, 3] }, { label: "interval high", stroke: "#8aa4c8", dash: [4, 3] }],
  }, data, div);
  div.append(h("p", "Quantiles with too few events beyond them are left out of the verdict (docs/compare.md).", "muted"));
  return div;
}
