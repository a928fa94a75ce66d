import { createCredentials } from "../core/credentials.js";
import { createStoreClient } from "../client/store-client.js";
import { readClientTls, readServerTls } from "../core/tls.js";
import { createLlmProxy } from "../proxy/llm-proxy.js";
import { reportAdvertised } from "./access-flags.js";
import type { ProxyArgs } from "./proxy-args.js";

/**
 * Runs `agl proxy` until SIGTERM or SIGINT: connects to the store, serves the proxy on its own port, prints
 * `agl proxy listening on URL (store: URL)`, and on a signal refuses new calls, lets calls in flight finish, and exits.
 */
export async function runProxy(args: ProxyArgs): Promise<number> {
  const clientTls = args.clientTls && readClientTls(args.clientTls);
  const store = createStoreClient({
    baseUrl: args.store,
    ...(args.token ? { token: args.token } : {}),
    ...(clientTls ? { tls: clientTls } : {}),
  });
  const proxy = createLlmProxy({
    store,
    maxRetries: args.maxRetries,
    ...(clientTls ? { upstream: { tls: clientTls } } : {}),
    ...(args.spansFirst ? { spanPromises: false } : {}),
    ...(args.accepted ? { credentials: createCredentials(args.accepted) } : args.token ? { token: args.token } : {}),
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
  process.stdout.write(`agl proxy listening on ${url} (store: ${args.store})\n`);
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
