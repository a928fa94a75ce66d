import { createStoreClient } from "./src/client/store-client.ts";
import { jsonValue } from "./test/support/store-harness.ts";
const c = createStoreClient({ baseUrl: process.argv[2]! });
const steps = process.argv[3]!.split(",").map(Number);
await c.enqueueRollouts({ rollouts: steps.map((s) => ({ input: jsonValue({ steps: s, stepMs: 200 }) })) });
c.close();
