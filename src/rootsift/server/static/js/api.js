// Calls to the server's API (POST /api/<command>, the CLI's options as JSON), and the
// same request as a rootsift command line and as a GET link to its JSON.

const KEY = "rootsift.key";

export class ApiError extends Error {}

export async function call(command, body) {
  const headers = { "Content-Type": "application/json" };
  const key = localStorage.getItem(KEY);
  if (key) headers["X-Rootsift-Key"] = key;
  const res = await fetch(`/api/${command}`, { method: "POST", headers, body: JSON.stringify(clean(body)) });
  if (res.status === 401) {
    const given = window.prompt("This server needs a read key (rootsift keys create --dataset '*' --scope read):");
    if (given) {
      localStorage.setItem(KEY, given.trim());
      return call(command, body);
    }
  }
  let data;
  try {
    data = await res.json();
  } catch {
    throw new ApiError(`${command}: ${res.status} ${res.statusText}`);
  }
  if (!res.ok || (data && data.error)) throw new ApiError(data.error ? data.error.message : res.statusText);
  return data;
}

/** The body without empty values (an empty field in a form means "not given"). */
export function clean(body) {
  const out = {};
  for (const [k, v] of Object.entries(body)) {
    if (v === undefined || v === null || v === "" || v === false) continue;
    if (Array.isArray(v) && !v.length) continue;
    out[k] = v;
  }
  return out;
}

function quote(s) {
  s = String(s);
  return /^[\w@%+=:,./-]+$/.test(s) ? s : `'${s.replace(/'/g, `'"'"'`)}'`;
}

/** `rootsift <command> DATASET --opt value ...` for a body. */
export function cli(command, body) {
  const parts = ["rootsift", command];
  const b = clean(body);
  if (b.dataset) parts.push(quote(b.dataset));
  for (const [k, v] of Object.entries(b)) {
    if (k === "dataset") continue;
    for (const one of Array.isArray(v) ? v : [v]) {
      parts.push(`--${k}`);
      if (one !== true) parts.push(quote(one));
    }
  }
  return parts.join(" ");
}

/** GET /api/<command>?... : the request's JSON as a link. */
export function jsonLink(command, body) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(clean(body))) for (const one of Array.isArray(v) ? v : [v]) q.append(k, String(one));
  return `/api/${command}?${q}`;
}
