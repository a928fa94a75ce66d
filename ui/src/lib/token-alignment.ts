/** One sampled token: its id, and what is known of its logprob and text. */
export interface AlignedToken {
  index: number;
  id: number;
  logprob?: number;
  /** The token's text as the engine reported it (OpenAI `logprobs.content[].token`), when it did. */
  text?: string;
  /** Where the token's text sits in the message text, when it could be placed. */
  start?: number;
  end?: number;
}

/** A stretch of the message text: covered by a token, or not (text the engine did not report per token). */
export type TextSegment = { kind: "token"; token: AlignedToken; text: string } | { kind: "text"; text: string };

export interface TokenAlignment {
  tokens: AlignedToken[];
  /** The message text cut into segments, tokens placed over it; empty when there is no text. */
  segments: TextSegment[];
  /** Tokens without a place in the text (a stop token, text that differs); shown after it. */
  unplaced: AlignedToken[];
  /** What does not line up, in words; empty when ids, logprobs and text all agree. */
  problems: string[];
}

export interface TokenAlignmentInput {
  ids: readonly number[];
  logprobs?: readonly number[] | undefined;
  tokenTexts?: readonly string[] | undefined;
  /** The assistant message's text. */
  text?: string | undefined;
}

/**
 * Lines a call's response token ids up with their logprobs (by position; the proxy records them aligned) and with the
 * message text, through the per-token texts the engine returned: each token is placed where its text continues the
 * previous one. Never re-tokenizes: without per-token texts, tokens are listed by id only.
 */
export function alignTokens(input: TokenAlignmentInput): TokenAlignment {
  const { ids, logprobs, tokenTexts, text } = input;
  const problems: string[] = [];
  const useLogprobs = logprobs !== undefined && logprobs.length > 0;
  if (useLogprobs && logprobs.length !== ids.length) {
    problems.push(`${ids.length} token ids but ${logprobs.length} logprobs`);
  }
  const useTexts = tokenTexts !== undefined && tokenTexts.length > 0;
  if (useTexts && tokenTexts.length !== ids.length) problems.push(`${ids.length} token ids but ${tokenTexts.length} token texts`);

  const tokens: AlignedToken[] = ids.map((id, index) => {
    const token: AlignedToken = { index, id };
    const lp = useLogprobs ? logprobs[index] : undefined;
    if (lp !== undefined) token.logprob = lp;
    const t = useTexts ? tokenTexts[index] : undefined;
    if (t !== undefined) token.text = t;
    return token;
  });
  if (text === undefined || text === "") return { tokens, segments: [], unplaced: tokens, problems };

  const segments: TextSegment[] = [];
  const unplaced: AlignedToken[] = [];
  let cursor = 0;
  for (const token of tokens) {
    const t = token.text;
    if (t === undefined || t === "" || !text.startsWith(t, cursor)) {
      unplaced.push(token);
      continue;
    }
    token.start = cursor;
    token.end = cursor + t.length;
    segments.push({ kind: "token", token, text: t });
    cursor = token.end;
  }
  if (cursor < text.length) {
    segments.push({ kind: "text", text: text.slice(cursor) });
    if (useTexts) problems.push(`the token texts cover ${cursor} of the message's ${text.length} characters`);
  }
  return { tokens, segments, unplaced, problems };
}

/**
 * The per-token texts and logprobs an OpenAI-compatible response body carries: chat completions
 * (`choices[0].logprobs.content[].token/logprob`) or completions (`choices[0].logprobs.tokens/token_logprobs`).
 */
export function tokensFromResponse(body: unknown): { texts?: string[]; logprobs?: number[] } {
  const choice = (body as { choices?: unknown[] } | null)?.choices?.[0] as { logprobs?: unknown } | undefined;
  const lp = choice?.logprobs as
    | { content?: { token?: unknown; logprob?: unknown }[]; tokens?: unknown[]; token_logprobs?: unknown[] }
    | null
    | undefined;
  if (!lp) return {};
  if (Array.isArray(lp.content)) {
    return {
      texts: lp.content.map((c) => (typeof c.token === "string" ? c.token : "")),
      logprobs: lp.content.map((c) => (typeof c.logprob === "number" ? c.logprob : Number.NaN)),
    };
  }
  if (Array.isArray(lp.tokens)) {
    return {
      texts: lp.tokens.map((t) => (typeof t === "string" ? t : "")),
      ...(Array.isArray(lp.token_logprobs) ? { logprobs: lp.token_logprobs.map((v) => (typeof v === "number" ? v : Number.NaN)) } : {}),
    };
  }
  return {};
}

/** A confidence class 0 (p ≥ 0.9) … 4 (p < 0.05) for colouring a token by its logprob; undefined without one. */
export function confidenceClass(logprob: number | undefined): 0 | 1 | 2 | 3 | 4 | undefined {
  if (logprob === undefined || Number.isNaN(logprob)) return undefined;
  const p = Math.exp(logprob);
  if (p >= 0.9) return 0;
  if (p >= 0.5) return 1;
  if (p >= 0.2) return 2;
  if (p >= 0.05) return 3;
  return 4;
}
