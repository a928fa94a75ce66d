/** Prompt template engines: Python-style f-strings and Jinja, with errors that say what went wrong. */
import { describe, expect, it } from "vitest";
import { renderFString } from "./f-string.js";
import { renderJinja } from "./jinja.js";
import { promptTemplate } from "./resources.js";

describe("f-string templates", () => {
  it("renders fields, attributes, indexes, conversions, escapes and format specs", () => {
    const vars = { user: { name: "Ada" }, items: ["x", "y"], price: 1234.5, n: 7, q: "hi" };
    expect(renderFString("{user.name} got {items[1]} for {price:,.2f} ({n:03d}) {{literal}} {q!r}", vars)).toBe(
      "Ada got y for 1,234.50 (007) {literal} 'hi'",
    );
    expect(renderFString("[{q:>5}|{q:<4}|{q:^6}|{n:+d}|{price:.1%}]", vars)).toBe("[   hi|hi  |  hi  |+7|123450.0%]");
    expect(renderFString("{obj}", { obj: { a: 1 } })).toBe('{"a":1}');
  });

  it("names the missing variable, the stray brace or the bad spec", () => {
    expect(() => renderFString("Hello {name}", { nam: 1 }, "greeting")).toThrow(
      "cannot render greeting (f-string): missing variable 'name' (given: nam) at position 6",
    );
    expect(() => renderFString("a } b", {})).toThrow(/single '}'/);
    expect(() => renderFString("a { b", {})).toThrow(/unclosed '{'/);
    expect(() => renderFString("{}", {})).toThrow(/positional field/);
    expect(() => renderFString("{x:.2f}", { x: "text" })).toThrow(/needs a number, got string/);
    expect(() => renderFString("{x.y}", { x: {} })).toThrow(/'x.y' has no 'y'/);
  });
});

describe("Jinja templates", () => {
  it("renders loops, conditions, filters and helpers", () => {
    const out = renderJinja("{% for m in messages %}{{ m.role | upper }}: {{ m.content }}\n{% endfor %}{{ range(3) | join(',') }}", {
      messages: [
        { role: "user", content: "2+2?" },
        { role: "assistant", content: "4" },
      ],
    });
    expect(out).toBe("USER: 2+2?\nASSISTANT: 4\n0,1,2");
  });

  it("fails clearly on syntax errors, raised errors and (strictly) missing variables", () => {
    expect(() => renderJinja("{{ name ", {}, "system prompt")).toThrow(/cannot render system prompt \(jinja\): syntax error/);
    expect(() => renderJinja("{{ raise_exception('bad input') }}", {})).toThrow(/bad input/);
    expect(() => renderJinja("{{ a }}{{ b }}", { a: 1 })).toThrow("missing variable 'b' (given: a)");
    expect(renderJinja("{{ a }}{{ b }}", { a: 1 }, "t", { strict: false })).toBe("1");
    expect(renderJinja("{% if extra is defined %}{{ extra }}{% else %}none{% endif %}", {})).toBe("none");
    expect(renderJinja("{{ title | default('untitled') }}", {})).toBe("untitled");
  });

  it("is what a jinja prompt template resource formats with", () => {
    expect(promptTemplate("Q: {{ q }}", "jinja").format({ q: "why" })).toBe("Q: why");
    expect(promptTemplate("Q: {q}").format({ q: "why" })).toBe("Q: why");
  });
});
