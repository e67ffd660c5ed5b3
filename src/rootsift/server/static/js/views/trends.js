// trends: what grows or falls per series (host), which part of a total drives it, which
// label separates the series that trend, time to a limit; the worst series drawn with its
// fitted line and the limit.
import { call } from "../api.js";
import { prob } from "../findings.js";
import { controls, h, table } from "../form.js";
import { dataset, footer, state, status } from "../main.js";

const bytes = (v) => {
  const a = Math.abs(v);
  for (const [u, d] of [["TiB", 2 ** 40], ["GiB", 2 ** 30], ["MiB", 2 ** 20], ["KiB", 2 ** 10]]) if (a >= d) return `${(v / d).toPrecision(3)} ${u}`;
  return `${+v.toPrecision(3)}`;
};
const amount = (field, v) => (v == null ? "–" : /bytes/.test(field || "") ? bytes(v) : (+v.toPrecision(3)).toLocaleString());

function what(f) {
  if (f.kind === "trend") return `${f.field} ${f.direction || ""} on ${f.series}`;
  if (f.kind === "component") return `${f.field}: ${f.share != null ? `${(100 * f.share).toFixed(0)} % of the trend` : ""}`;
  if (f.kind === "cohort") return `${f.field} = ${f.value}`;
  if (f.kind === "exhaustion") return `${f.field} on ${f.series || "every series"} reaches the limit`;
  return f.field || f.kind;
}

function numbers(f) {
  if (f.kind === "trend") return `${amount(f.field, f.slope_per_day)}/day (${(100 * f.relative_per_day).toFixed(2)} %/day)`;
  if (f.kind === "exhaustion") {
    if (!f.at) return "not within the horizon";
    const [lo, hi] = f.interval_at || [];
    return `${f.at} (95 %: ${lo || "?"} … ${hi || "later"})`;
  }
  if (f.kind === "cohort") return f.p_value != null ? `p ${prob(f.p_value)}` : "";
  return f.slope_per_day != null ? `${amount(f.field, f.slope_per_day)}/day` : "";
}

export async function trends(main) {
  main.append(h("h1", "Trends"));
  const name = dataset();
  if (!name) return;
  main.append(controls([
    { name: "measure", label: "measure", value: state.get("measure"), placeholder: "every numeric field" },
    { name: "where", label: "where", value: state.get("where"), wide: true, placeholder: 'kind = "meminfo"' },
    { name: "by", label: "by", value: state.get("by"), placeholder: "host (auto)" },
    { name: "limit", label: "limit (value or field)", value: state.get("limit") },
    { name: "from", label: "from", value: state.get("from") },
    { name: "to", label: "to", value: state.get("to") },
  ], "Find trends", (v) => state.set({ ...v, run: "1" })));
  const body = { dataset: name, measure: state.get("measure"), where: state.get("where"), by: state.get("by"),
    limit: state.get("limit"), from: state.get("from"), to: state.get("to") };
  footer("trends", body);
  if (!state.get("run")) {
    main.append(h("p", "What is leaking or filling, where, which part of it, and when it runs out.", "muted"));
    return;
  }
  status("fitting…");
  const r = await call("trends", body);
  status(r.warnings.length ? r.warnings.join("; ") : `${r.series.length} series, buckets of ${r.bucket}`);
  if (r.chart && r.chart.hours && r.chart.hours.length) main.append(chart(r.chart));
  main.append(table(["kind", "what", "change", "q"], r.findings.map((f) => [f.kind, what(f), numbers(f), f.q_value != null ? prob(f.q_value) : "–"])));
}

function chart(c) {
  const div = h("div");
  const x = c.hours.map((v) => v * 3600);
  const data = [x, c.values, c.fitted];
  const series = [{ label: "time (UTC)" }, { label: `${c.field} on ${c.series}`, stroke: "#2b66a8", width: 0, points: { show: true, size: 4 } },
    { label: "trend", stroke: "#d7263d", width: 2 }];
  if (c.limit != null) { data.push(x.map(() => c.limit)); series.push({ label: "limit", stroke: "#344054", dash: [6, 4], width: 1.5 }); }
  const width = Math.max(480, Math.min(document.getElementById("main").clientWidth - 20, 1100));
  new uPlot({ width, height: 300, title: `${c.field} on ${c.series}: samples, fitted trend${c.limit != null ? " and the limit" : ""}`,
    tzDate: (ts) => uPlot.tzDate(new Date(ts * 1e3), "Etc/UTC"),
    axes: [{ label: "time (UTC)" }, { label: c.field, size: 80, values: (u, vals) => vals.map((v) => amount(c.field, v)) }],
    series }, data, div);
  return div;
}
