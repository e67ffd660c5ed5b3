import { call } from "../api.js";
import { h, table } from "../form.js";
import { allDatasets, dataset, footer, state } from "../main.js";

export async function datasetsView(main) {
  main.append(h("h1", "Datasets"));
  const rows = allDatasets().map((d) => {
    const a = document.createElement("a");
    a.href = `?view=query&dataset=${encodeURIComponent(d.name)}`;
    a.textContent = d.name;
    a.addEventListener("click", (e) => { e.preventDefault(); state.set({ view: "query", dataset: d.name }); });
    return [a, d.events, d.stored_rows, d.first, d.last, `${(d.bytes_on_disk / 1e6).toFixed(1)} MB`, d.segments];
  });
  main.append(table(["dataset", "events", "rows", "first", "last", "on disk", "segments"], rows, (i) => i === 1 || i === 2 || i >= 5));
  const name = dataset();
  if (!name) { main.append(h("p", "No datasets yet: send events to the server or run rootsift ingest.", "muted")); footer("datasets", {}); return; }
  main.append(h("h2", `Fields of ${name}`));
  const schema = await call("schema", { dataset: name });
  main.append(table(["field", "type", "present", "distinct (estimate)"], schema.fields.map((f) => [f.field, f.type, `${(100 * f.present_fraction).toFixed(0)} %`, f.distinct_estimate]), (i) => i >= 2));
  footer("schema", { dataset: name });
}
