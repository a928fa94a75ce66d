import { createStoreClient } from "../client/store-client.js";
import { createCredentials } from "../core/credentials.js";
import { readClientTls, readServerTls } from "../core/tls.js";
import { createLlmProxy } from "../proxy/llm-proxy.js";
import { reportAdvertised } from "./access-flags.js";
import type { ProxyArgs } from "./proxy-args.js";

/**
 * Runs `agl proxy` until SIGTERM or SIGINT: connects to the store, serves the proxy on its own port, prints
 * `agl proxy listening on URL (store: URL)`, and on a signal refuses new calls, lets calls in flight finish, and exits.
 */
export async function runProxy(args: ProxyArgs): Promise<number> {
  const store = createStoreClient(args.store);
  const proxy = createLlmProxy({
    store,
    maxRetries: args.maxRetries,
    ...(args.spansFirst ? { spanPromises: false } : {}),
    ...(args.tokenIn ? { tokenIn: true } : {}),
    ...(args.accepted ? { credentials: createCredentials(args.accepted) } : args.store.token ? { token: args.store.token } : {}),
    ...(args.store.caFile || args.store.certFile ? { upstream: { tls: readClientTls(args.store) ?? {} } } : {}),
    ...(args.backends.length > 0 ? { backends: args.backends.map((endpoint) => ({ endpoint, model: args.model ?? "" })) } : {}),
  });
  let url: string;
  try {
    url = await proxy.listen(args.port, args.host, args.tls && readServerTls(args.tls));
  } catch (error) {
    await proxy.close();
    store.close();
    throw error;
  }
  process.stdout.write(`agl proxy listening on ${url} (store: ${args.store.baseUrl})\n`);
  reportAdvertised("agl proxy", url, args.advertise);
  const signal = await new Promise<NodeJS.Signals>((resolve) => {
    process.once("SIGTERM", resolve);
    process.once("SIGINT", resolve);
  });
  process.once(signal, () => process.exit(1));
  proxy.pause({ mode: "reject", retryAfterSeconds: 1 });
  await proxy.drain(10_000);
  await proxy.close();
  store.close();
  return 0;
}
