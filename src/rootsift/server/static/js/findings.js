// Findings of explain and investigate as a list: what, selection-vs-baseline bars for a
// value's share (or the quantiles of a measure), q-value; a dimension value can become a
// filter or a breakdown.

const pct = (x) => (x == null ? "–" : `${(100 * x).toFixed(1)} %`);
export const prob = (x) => (x === 0 ? "< 1e-300" : x < 1e-3 ? x.toExponential(1) : (+x.toPrecision(2)).toString());
const num = (x) => (x == null ? "–" : Math.abs(x) >= 100 ? Math.round(x).toLocaleString() : (+x.toPrecision(3)).toString());

export function filterFor(f) {
  const v = typeof f.value === "number" ? f.value : `"${String(f.value).replace(/\\/g, "\\\\").replace(/"/g, '\\"')}"`;
  return f.value === null ? `${f.field} is null` : `${f.field} = ${v}`;
}

function bars(rows) {
  const div = document.createElement("div");
  div.className = "bars";
  const top = Math.max(1e-9, ...rows.map((r) => r.value || 0));
  for (const r of rows) {
    const name = document.createElement("span");
    name.textContent = r.name;
    const bar = document.createElement("div");
    bar.className = `bar ${r.cls}`;
    bar.style.width = `${Math.max(1, (100 * (r.value || 0)) / top)}%`;
    bar.title = `${r.name}: ${r.text}`;
    const text = document.createElement("span");
    text.textContent = r.text;
    div.append(name, bar, text);
  }
  return div;
}

export function renderFindings(list, findings, { onFilter, onBreakdown, limit = 15 } = {}) {
  list.replaceChildren();
  list.className = "findings";
  if (!findings.length) {
    const li = document.createElement("li");
    li.className = "muted";
    li.textContent = "No significant difference.";
    list.append(li);
    return;
  }
  for (const f of findings.slice(0, limit)) {
    const li = document.createElement("li");
    const what = document.createElement("div");
    what.className = "what";
    const q = f.q_value != null ? ` · q ${prob(f.q_value)}` : "";
    if (f.kind === "suspect") {
      what.textContent = `suspect: ${f.event}`;
      li.append(what);
      const when = f.relation === "after" ? "after the onset: not a cause" : `${f.lead} before the shift`;
      li.append(Object.assign(document.createElement("div"), { textContent: `${f.change_kind || "change"} at ${f.time}, ${when}${f.coincides_with_onset ? ", at the onset" : ""}` }));
      const meta = document.createElement("div");
      meta.className = "muted";
      meta.textContent = `step at the event: z ${num(f.step_z)}, p ${prob(f.p_value)}`;
      li.append(meta);
      list.append(li);
      continue;
    }
    if (f.value !== undefined && f.kind !== "measure") {
      what.textContent = `${f.kind}: ${filterFor(f)}`;
      const add = document.createElement("button");
      add.type = "button";
      add.className = "secondary";
      add.textContent = "filter";
      add.title = `add ${filterFor(f)} to the filter`;
      add.addEventListener("click", () => onFilter && onFilter(filterFor(f)));
      const by = document.createElement("button");
      by.type = "button";
      by.className = "secondary";
      by.textContent = "break down";
      by.title = `break the query down by ${f.field}`;
      by.addEventListener("click", () => onBreakdown && onBreakdown(f.field));
      what.append(add, by);
      li.append(what);
      if (f.selection_fraction != null) {
        li.append(bars([
          { name: "selection", cls: "sel", value: f.selection_fraction, text: pct(f.selection_fraction) },
          { name: "baseline", cls: "base", value: f.baseline_fraction, text: pct(f.baseline_fraction) },
        ]));
      }
    } else {
      what.textContent = `${f.kind}: ${f.field || f.description || ""}${f.direction ? ` (${f.direction})` : ""}`;
      li.append(what);
      if (f.quantiles) {
        const rows = [];
        for (const [name, v] of Object.entries(f.quantiles)) {
          rows.push({ name: `${name} sel`, cls: "sel", value: v.selection, text: num(v.selection) });
          rows.push({ name: `${name} base`, cls: "base", value: v.baseline, text: num(v.baseline) });
        }
        li.append(bars(rows));
      }
    }
    const meta = document.createElement("div");
    meta.className = "muted";
    const counts = f.counts ? ` · ${f.counts.selection?.toLocaleString()} selected, ${f.counts.baseline?.toLocaleString()} baseline` : "";
    meta.textContent = `score ${num(f.score)}${q}${counts}${f.cause_set ? " · in the cause set" : ""}`;
    li.append(meta);
    list.append(li);
  }
}
