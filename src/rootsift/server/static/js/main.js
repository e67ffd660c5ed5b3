// The page: one view at a time, its whole state in the URL (a permalink), the dataset
// picker in the header, and under every view the same request as a CLI command and a
// link to its JSON.
import { call, cli, jsonLink } from "./api.js";
import { views } from "./views.js";

const main = document.getElementById("main");
const picker = document.getElementById("dataset");

export const state = {
  get params() { return new URLSearchParams(location.search); },
  get(key) { return this.params.get(key) || ""; },
  all(key) { return this.params.getAll(key); },
  /** Change the state: push a history entry (back works) and render. */
  set(changes, { push = true, render = true } = {}) {
    const p = this.params;
    for (const [k, v] of Object.entries(changes)) {
      p.delete(k);
      for (const one of Array.isArray(v) ? v : [v]) if (one !== undefined && one !== null && one !== "") p.append(k, one);
    }
    const url = `?${p}`;
    if (push) history.pushState(null, "", url); else history.replaceState(null, "", url);
    if (render) show();
  },
};

export function footer(command, body) {
  const line = cli(command, body);
  document.getElementById("cli").textContent = line;
  document.getElementById("json-link").href = jsonLink(command, body);
  document.getElementById("footer").dataset.command = line;
}

document.getElementById("copy-cli").addEventListener("click", async () => {
  const line = document.getElementById("footer").dataset.command || "";
  try { await navigator.clipboard.writeText(line); } catch { window.prompt("Copy:", line); }
});

export function status(text, isError = false) {
  let el = main.querySelector(".status");
  if (!el) {
    el = document.createElement("div");
    el.className = "status";
    el.setAttribute("role", "status");
    const after = main.querySelector("form.controls") || main.querySelector("h1");
    if (after) after.after(el); else main.prepend(el);
  }
  el.textContent = text;
  el.classList.toggle("error", isError);
}

let datasets = [];

async function loadDatasets() {
  try {
    datasets = (await call("datasets", {})).datasets;
  } catch (e) {
    datasets = [];
    status(String(e.message || e), true);
  }
  picker.replaceChildren(...datasets.map((d) => new Option(d.name, d.name)));
  if (!datasets.length) picker.append(new Option("(no datasets)", ""));
}

picker.addEventListener("change", () => state.set({ dataset: picker.value }));

export function dataset() { return state.get("dataset") || (datasets[0] && datasets[0].name) || ""; }
export function allDatasets() { return datasets; }

async function show() {
  const view = state.get("view") || "datasets";
  for (const a of document.querySelectorAll("nav a")) {
    a.href = `?${new URLSearchParams({ view: a.dataset.view, ...(dataset() ? { dataset: dataset() } : {}) })}`;
    if (a.dataset.view === view) a.setAttribute("aria-current", "page"); else a.removeAttribute("aria-current");
  }
  picker.value = dataset();
  main.replaceChildren();
  document.title = `rootsift · ${view}${dataset() ? ` · ${dataset()}` : ""}`;
  const render = views[view] || views.datasets;
  try {
    await render(main);
  } catch (e) {
    status(String(e.message || e), true);
  }
  document.body.dataset.ready = view;
}

window.addEventListener("popstate", show);
await loadDatasets();
await show();
