import { describe, expect, it } from "vitest";
import { alignTokens, confidenceClass, tokensFromResponse } from "./token-alignment.js";

describe("alignTokens", () => {
  it("places each token over the text where it continues the previous one", () => {
    const a = alignTokens({ ids: [10, 11, 2], logprobs: [-0.1, -2, -0.01], tokenTexts: ["Hel", "lo", ""], text: "Hello" });
    expect(a.problems).toEqual([]);
    expect(a.segments.map((s) => s.text)).toEqual(["Hel", "lo"]);
    expect(a.tokens[1]).toEqual({ index: 1, id: 11, logprob: -2, text: "lo", start: 3, end: 5 });
    // The stop token has no text: it is listed apart.
    expect(a.unplaced.map((t) => t.id)).toEqual([2]);
  });

  it("reports logprobs that do not match the ids in number", () => {
    const a = alignTokens({ ids: [1, 2, 3], logprobs: [-1, -2] });
    expect(a.problems).toEqual(["3 token ids but 2 logprobs"]);
    expect(a.tokens[2]).toEqual({ index: 2, id: 3 });
  });

  it("keeps the text the tokens do not cover as plain text and says so", () => {
    const a = alignTokens({ ids: [1, 2], tokenTexts: ["ab", "XX"], text: "abcd" });
    expect(a.segments).toEqual([
      { kind: "token", token: expect.objectContaining({ id: 1 }), text: "ab" },
      { kind: "text", text: "cd" },
    ]);
    expect(a.unplaced.map((t) => t.id)).toEqual([2]);
    expect(a.problems).toEqual(["the token texts cover 2 of the message's 4 characters"]);
  });

  it("lists tokens by id alone when the engine sent no token texts", () => {
    const a = alignTokens({ ids: [5, 6], logprobs: [-0.5, -0.2], text: "hi" });
    expect(a.segments).toEqual([{ kind: "text", text: "hi" }]);
    expect(a.unplaced.map((t) => t.id)).toEqual([5, 6]);
    expect(a.problems).toEqual([]);
  });
});

describe("tokensFromResponse", () => {
  it("reads chat completion logprobs", () => {
    const body = {
      choices: [
        {
          logprobs: {
            content: [
              { token: "Hi", logprob: -0.1 },
              { token: "!", logprob: -1.5 },
            ],
          },
        },
      ],
    };
    expect(tokensFromResponse(body)).toEqual({ texts: ["Hi", "!"], logprobs: [-0.1, -1.5] });
  });

  it("reads completion logprobs", () => {
    const body = { choices: [{ logprobs: { tokens: ["a", "b"], token_logprobs: [-1, -2] } }] };
    expect(tokensFromResponse(body)).toEqual({ texts: ["a", "b"], logprobs: [-1, -2] });
  });

  it("returns nothing for bodies without logprobs", () => {
    expect(tokensFromResponse({ choices: [{ message: { content: "x" } }] })).toEqual({});
    expect(tokensFromResponse(null)).toEqual({});
  });
});

describe("confidenceClass", () => {
  it("classes tokens by probability", () => {
    expect([Math.log(0.95), Math.log(0.6), Math.log(0.3), Math.log(0.1), Math.log(0.01)].map(confidenceClass)).toEqual([0, 1, 2, 3, 4]);
    expect(confidenceClass(undefined)).toBeUndefined();
  });
});
