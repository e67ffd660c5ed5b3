// profile-diff: which functions take a different share of the samples in B than in A,
// and the differential flame graph (widths from B, red grew, blue shrank; click zooms).
import { call } from "../api.js";
import { prob } from "../findings.js";
import { controls, h, table } from "../form.js";
import { dataset, footer, state, status } from "../main.js";

const pts = (x) => (x == null ? "–" : `${x >= 0 ? "+" : ""}${(+x).toFixed(2)}`);

export async function profiles(main) {
  main.append(h("h1", "Profiles"));
  const name = dataset();
  if (!name) return;
  main.append(controls([
    { name: "a", label: "profiles A (baseline)", value: state.get("a"), wide: true, placeholder: 'version = "1.0"' },
    { name: "bb", label: "profiles B", value: state.get("bb"), wide: true, placeholder: 'version = "1.1"' },
    { name: "type", label: "type", value: state.get("type"), placeholder: "cpu" },
    { name: "focus", label: "focus (function)", value: state.get("focus") },
  ], "Diff", (v) => state.set(v)));
  const body = { dataset: name, a: state.get("a"), b: state.get("bb"), type: state.get("type"), focus: state.get("focus") };
  footer("profile-diff", body);
  if (!body.a || !body.b) { main.append(h("p", "Give the two cohorts of profiles as filters.", "muted")); return; }
  status("diffing…");
  const r = await call("profile-diff", body);
  status(r.warnings && r.warnings.length ? r.warnings.join("; ") : "");
  const fns = r.findings.filter((f) => f.function);
  const share = (x) => (x == null ? "–" : `${(100 * x).toFixed(2)}`);
  // each function is judged on its self share, or on its total share (with its callees) when that is where it changed
  main.append(table(["function", "", "share", "% of A", "% of B", "change (pts)", "excess (pts)", "q"],
    fns.slice(0, 15).map((f) => {
      const basis = f.basis || "self";
      return [f.function, `${f.direction || f.status}`, basis, share(f.a && f.a[`${basis}_share`]), share(f.b && f.b[`${basis}_share`]),
        pts(f.change_points && f.change_points[basis]), pts(f.excess_points), f.q_value != null ? prob(f.q_value) : "–"];
    }),
    (i) => i >= 3 && i <= 6));
  const q = new URLSearchParams(Object.entries({ dataset: name, a: body.a, b: body.b, type: body.type, focus: body.focus }).filter(([, v]) => v));
  const frame = document.createElement("iframe");
  frame.title = "differential flame graph";
  frame.src = `/api/flamegraph?${q}`;
  frame.style.cssText = "width: 100%; height: 640px; border: 1px solid #d8dde6;";
  main.append(h("h2", "Differential flame graph"), frame);
}
