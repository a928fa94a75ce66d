import { AglError } from "../core/errors.js";

/**
 * Renders a Python `str.format`-style template: `{name}`, `{user.name}`, `{items[0]}`, `{x!r}`, `{price:,.2f}`,
 * with `{{` and `}}` for literal braces. Every field must be named and present in `vars`; any problem throws an
 * {@link AglError} (`template_render`) that says which field and where.
 */
export function renderFString(template: string, vars: Record<string, unknown>, label = "template"): string {
  let out = "";
  let i = 0;
  const fail = (message: string, at: number): never => {
    throw new AglError("template_render", `cannot render ${label} (f-string): ${message} at position ${at}`);
  };
  while (i < template.length) {
    const ch = template[i] as string;
    if (ch === "}") {
      if (template[i + 1] === "}") {
        out += "}";
        i += 2;
        continue;
      }
      fail("single '}' (write '}}' for a literal brace)", i);
    }
    if (ch !== "{") {
      out += ch;
      i++;
      continue;
    }
    if (template[i + 1] === "{") {
      out += "{";
      i += 2;
      continue;
    }
    const close = template.indexOf("}", i + 1);
    if (close < 0) fail("unclosed '{' (write '{{' for a literal brace)", i);
    const body = template.slice(i + 1, close);
    const specAt = body.indexOf(":");
    const head = specAt < 0 ? body : body.slice(0, specAt);
    const spec = specAt < 0 ? "" : body.slice(specAt + 1);
    const [field = "", conversion] = head.split("!");
    if (!field.trim()) fail("positional field '{}': name every field, e.g. {question}", i);
    let value = lookup(field.trim(), vars, (m) => fail(m, i));
    if (conversion === "r") value = typeof value === "string" ? `'${value}'` : value;
    else if (conversion !== undefined && conversion !== "s") fail(`unknown conversion '!${conversion}'`, i);
    out += formatValue(value, spec, (m) => fail(`field {${field}}: ${m}`, i));
    i = close + 1;
  }
  return out;
}

function lookup(path: string, vars: Record<string, unknown>, fail: (m: string) => never): unknown {
  const parts = path.match(/[^.[\]]+|\[[^\]]*\]/g) ?? [];
  const [root, ...rest] = parts;
  if (root === undefined || !Object.hasOwn(vars, root)) {
    fail(`missing variable '${root ?? path}' (given: ${Object.keys(vars).join(", ") || "none"})`);
  }
  let value: unknown = vars[root as string];
  for (const part of rest) {
    const key = part.startsWith("[") ? part.slice(1, -1) : part;
    if (value === null || value === undefined || !(key in Object(value))) fail(`'${path}' has no '${key}'`);
    value = (value as Record<string, unknown>)[key];
  }
  return value;
}

const specPattern = /^(?:(.)?([<>^]))?([+\- ])?(0)?(\d+)?(,)?(?:\.(\d+))?([sdfe%g])?$/;

function formatValue(value: unknown, spec: string, fail: (m: string) => never): string {
  const text = (v: unknown) => (typeof v === "object" && v !== null ? JSON.stringify(v) : String(v));
  if (!spec) return text(value);
  const m = specPattern.exec(spec);
  if (!m) return fail(`unsupported format spec ':${spec}'`);
  const [, fillChar, align, sign, zero, width, comma, precision, type] = m;
  const fill = fillChar ?? (zero && !align ? "0" : " ");
  let body: string;
  if (type === undefined || type === "s") {
    body = text(value);
    if (precision !== undefined && type === "s") body = body.slice(0, Number(precision));
  } else {
    if (typeof value !== "number") return fail(`format ':${spec}' needs a number, got ${typeof value}`);
    const p = precision === undefined ? undefined : Number(precision);
    if (type === "d") {
      if (!Number.isInteger(value)) return fail(`format ':d' needs an integer, got ${value}`);
      body = String(Math.abs(value));
    } else if (type === "f") body = Math.abs(value).toFixed(p ?? 6);
    else if (type === "%") body = `${(Math.abs(value) * 100).toFixed(p ?? 6)}%`;
    else if (type === "e") body = Math.abs(value).toExponential(p ?? 6);
    else body = String(p === undefined ? Math.abs(value) : Number(Math.abs(value).toPrecision(p)));
    if (comma) body = body.replace(/^(\d+)/, (d) => d.replace(/\B(?=(\d{3})+(?!\d))/g, ","));
    const minus = value < 0 || Object.is(value, -0);
    body = (minus ? "-" : sign === "+" ? "+" : sign === " " ? " " : "") + body;
  }
  const w = width === undefined ? 0 : Number(width);
  if (body.length >= w) return body;
  const pad = w - body.length;
  const side = align ?? (type && type !== "s" ? ">" : "<");
  // Zero padding goes between the sign and the digits, as in Python.
  if (zero && !align && /^[+\- ]/.test(body)) return body[0] + "0".repeat(pad) + body.slice(1);
  if (side === "<") return body + fill.repeat(pad);
  if (side === ">") return fill.repeat(pad) + body;
  return fill.repeat(Math.floor(pad / 2)) + body + fill.repeat(Math.ceil(pad / 2));
}
