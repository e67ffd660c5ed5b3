// investigate: the region it found outlined on the measure's heatmap, what it is, the
// findings; compare: cohorts A and B, each metric's verdict.
import { call } from "../api.js";
import { prob, renderFindings } from "../findings.js";
import { controls, h } from "../form.js";
import { Heatmap } from "../heatmap.js";
import { dataset, footer, state, status } from "../main.js";

export async function investigate(main) {
  main.append(h("h1", "Investigate"));
  const name = dataset();
  if (!name) return;
  main.append(controls([
    { name: "from", label: "from", value: state.get("from"), placeholder: "-6h" },
    { name: "to", label: "to", value: state.get("to") },
    { name: "where", label: "where", value: state.get("where"), wide: true },
    { name: "measure", label: "measure", value: state.get("measure"), placeholder: "the duration field" },
    { name: "changes", label: "change events (dataset)", value: state.get("changes"), placeholder: "deploys" },
  ], "Investigate", (v) => state.set({ ...v, run: "1" })));
  const body = { dataset: name, from: state.get("from"), to: state.get("to"), where: state.get("where"), measure: state.get("measure"), changes: state.get("changes") };
  footer("investigate", body);
  if (!state.get("run")) {
    main.append(h("p", "Finds when things went wrong (a latency shift, a stall, a drop), then explains that region.", "muted"));
    return;
  }
  status("investigating…");
  const result = await call("investigate", body);
  const a = result.anomaly;
  if (!a) { status(result.warnings.join("; ") || "nothing anomalous found"); return; }
  status(`${a.kind} from ${a.from} to ${a.to}${a.p_value != null ? ` (p ${a.p_value === 0 ? "< 1e-300" : `≤ ${prob(a.p_value)}`})` : ""}`);
  const grid = h("div", "", "split");
  const left = h("div"), right = h("div");
  grid.append(left, right);
  main.append(grid);
  if (a.measure) {
    const heat = await call("query", { dataset: name, from: state.get("from"), to: state.get("to"), where: state.get("where"), calc: [`heatmap(${a.measure})`] });
    if (heat.heatmap && heat.heatmap.times.length) new Heatmap(left, heat.heatmap, { mark: [a.from, a.to] });
    left.append(h("p", "The region investigate found is outlined in red.", "muted"));
  }
  for (const r of (result.regions || []).slice(1)) left.append(h("p", `also ${r.kind} from ${r.from} to ${r.to}`, "muted"));
  right.append(h("h2", "What is different in the region"));
  const list = h("ul");
  right.append(list);
  renderFindings(list, result.findings, {
    onFilter: (cond) => state.set({ where: state.get("where") ? `${state.get("where")} and ${cond}` : cond }),
    onBreakdown: (f) => state.set({ view: "query", b: f, c: ["count"], g: "", run: "" }),
  });
}
