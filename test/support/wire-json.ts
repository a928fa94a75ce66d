/**
 * A value decoded at run time with no static type: parsed JSON answers, requests a test engine received, proto-loader's
 * plain objects. Tests assert the fields they read, so the assertion is the type check.
 */
// biome-ignore lint/suspicious/noExplicitAny: the one alias for untyped wire values in tests (see above)
export type WireJson = any;
