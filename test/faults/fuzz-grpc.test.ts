/**
 * Bad input over native gRPC: a bounded, seeded fuzz of every store method (random and mutated protobuf, random
 * bytes, another method's message, unknown paths) against real `agl serve` processes on each storage backend. The
 * server answers every call with a proper status, stays up and healthy, and its data stays consistent; data the
 * fuzzer never named is untouched.
 */
import { describeFuzz } from "../support/fuzz/fuzz-suite.js";
import { fuzzGrpc } from "../support/fuzz/grpc-fuzz.js";

describeFuzz("gRPC", fuzzGrpc);
