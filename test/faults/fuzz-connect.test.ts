/**
 * Bad input over Connect (HTTP/1.1): a bounded, seeded fuzz of every store method with random, mutated and damaged
 * JSON and binary bodies, odd content types, timeouts and protocol versions, broken stream envelopes, and OTLP/HTTP
 * trace exports, against real `agl serve` processes on each storage backend. Every request gets a proper answer (a
 * Connect error code, never a dropped connection or INTERNAL); the server stays up, healthy and consistent; data the
 * fuzzer never named is untouched.
 */
import { fuzzConnect } from "../support/fuzz/connect-fuzz.js";
import { describeFuzz } from "../support/fuzz/fuzz-suite.js";

describeFuzz("Connect (HTTP/1.1)", fuzzConnect);
