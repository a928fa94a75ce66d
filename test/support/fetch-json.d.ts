// Tests read many JSON answers whose shape they assert on anyway: `Response.json()` is an untyped wire value there.
import type { WireJson } from "./wire-json.js";

declare global {
  interface Response {
    json(): Promise<WireJson>;
  }
}
