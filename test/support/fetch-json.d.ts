// Tests read many JSON answers whose shape they assert on anyway: let `Response.json()` be `any` there.
declare global {
  interface Response {
    json(): Promise<any>;
  }
}
export {};
