// Labelled controls in a form; submitting (Enter or the button) calls back with values.

export function controls(fields, submitText, onSubmit) {
  const form = document.createElement("form");
  form.className = "controls";
  for (const f of fields) {
    const label = document.createElement("label");
    label.textContent = f.label;
    let input;
    if (f.options) {
      input = document.createElement("select");
      for (const o of f.options) input.append(new Option(o, o));
    } else {
      input = document.createElement("input");
      input.type = "text";
      if (f.placeholder) input.placeholder = f.placeholder;
      if (f.wide) input.className = "wide";
    }
    input.name = f.name;
    input.value = f.value || "";
    label.append(input);
    form.append(label);
  }
  const button = document.createElement("button");
  button.type = "submit";
  button.textContent = submitText;
  form.append(button);
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    onSubmit(Object.fromEntries(new FormData(form).entries()));
  });
  return form;
}

export function table(columns, rows, numeric = () => false) {
  const t = document.createElement("table");
  const head = t.createTHead().insertRow();
  columns.forEach((c, i) => {
    const th = document.createElement("th");
    th.textContent = c;
    if (numeric(i)) th.className = "num";
    head.append(th);
  });
  const body = t.createTBody();
  for (const row of rows) {
    const tr = body.insertRow();
    row.forEach((v, i) => {
      const td = tr.insertCell();
      if (v instanceof Node) td.append(v); else td.textContent = v == null ? "∅" : typeof v === "number" ? (+v.toPrecision(6)).toLocaleString() : String(v);
      if (numeric(i)) td.className = "num";
    });
  }
  return t;
}

export function list(text) {
  return text.split(",").map((s) => s.trim()).filter(Boolean);
}

export function h(tag, text, cls) {
  const el = document.createElement(tag);
  if (text) el.textContent = text;
  if (cls) el.className = cls;
  return el;
}
