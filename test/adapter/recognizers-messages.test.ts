/** The adapter table (which spans are LLM calls and agents) and the messages view APO reads. */
import { describe, expect, it } from "vitest";
import { spansToMessages } from "../../src/adapter/messages-view.js";
import { agentNameOf, recognizeLlmCall } from "../../src/adapter/recognizers.js";
import * as sc from "../../src/core/semconv.js";
import { llmSpan, rewardSpan, span } from "../support/span-factory.js";

describe("adapter table", () => {
  it("recognises LLM calls of the proxy, the agl hooks, gen_ai spans and the frameworks' native shapes", () => {
    const cases: [ReturnType<typeof span>, string | undefined, number | undefined][] = [
      [llmSpan({ id: "1", seq: 1, prompt: [1], response: [2] }), "proxy", 30],
      [span({ id: "2", seq: 1, attrs: { [sc.AGL_LLM_SOURCE]: sc.LlmSource.openaiFetch } }), "openai-fetch", 20],
      [span({ id: "3", seq: 1, attrs: { [sc.AGL_LLM_SOURCE]: sc.LlmSource.vercelAi } }), "vercel-ai", 10],
      [span({ id: "4", seq: 1, attrs: { [sc.GEN_AI_OPERATION_NAME]: "text_completion" } }), "gen_ai", 5],
      [span({ id: "5", seq: 1, name: "ai.streamText.doStream" }), "vercel-ai", 4],
      [span({ id: "6", seq: 1, attrs: { [sc.OPENAI_AGENTS_SPAN_TYPE]: "generation" } }), "openai-agents", 4],
      [span({ id: "7", seq: 1, attrs: { [sc.LANGCHAIN_RUN_TYPE]: "chat_model" } }), "langchain", 4],
      [span({ id: "8", seq: 1, attrs: { [sc.GEN_AI_OPERATION_NAME]: "execute_tool" } }), undefined, undefined],
      [span({ id: "9", seq: 1, name: "ai.generateText" }), undefined, undefined],
    ];
    for (const [s, source, priority] of cases) expect(recognizeLlmCall(s), s.spanId).toEqual(source ? { source, priority } : undefined);
  });

  it("names agents from gen_ai, OpenAI Agents, Agents for Python, LangChain and the AI SDK", () => {
    expect(
      agentNameOf(span({ id: "a", seq: 1, attrs: { [sc.GEN_AI_OPERATION_NAME]: "invoke_agent", [sc.GEN_AI_AGENT_NAME]: "triage" } })),
    ).toBe("triage");
    expect(
      agentNameOf(span({ id: "b", seq: 1, attrs: { [sc.GEN_AI_OPERATION_NAME]: "chat", [sc.GEN_AI_AGENT_NAME]: "triage" } })),
    ).toBeUndefined();
    expect(
      agentNameOf(span({ id: "c", seq: 1, attrs: { [sc.OPENAI_AGENTS_SPAN_TYPE]: "agent", "openai.agents.agent.name": "helper" } })),
    ).toBe("helper");
    expect(agentNameOf(span({ id: "d", seq: 1, attrs: { "agent.name": "legacy" } }))).toBe("legacy");
    expect(agentNameOf(span({ id: "e", seq: 1, attrs: { [sc.LANGCHAIN_CHAIN_TYPE]: "AgentExecutor" } }))).toBe("AgentExecutor");
    expect(agentNameOf(span({ id: "f", seq: 1, name: "ai.generateText", attrs: { [sc.AI_SDK_FUNCTION_ID]: "solver" } }))).toBe("solver");
  });
});

describe("messages view", () => {
  it("rebuilds each call's conversation from the proxy's bodies, with rewards and feedback", () => {
    const request = {
      model: "m",
      messages: [
        { role: "system", content: "Be brief." },
        { role: "user", content: "2+3?" },
      ],
      tools: [{ type: "function", function: { name: "add" } }],
    };
    const response = {
      choices: [
        {
          index: 0,
          message: {
            role: "assistant",
            content: null,
            tool_calls: [{ id: "c1", type: "function", function: { name: "add", arguments: '{"a":2}' } }],
          },
        },
      ],
    };
    const view = spansToMessages([
      span({ id: "root", seq: 1 }),
      llmSpan({
        id: "call",
        parent: "root",
        seq: 2,
        prompt: [1],
        response: [2],
        attrs: { [sc.AGL_LLM_REQUEST]: JSON.stringify(request), [sc.AGL_LLM_RESPONSE]: JSON.stringify(response) },
      }),
      rewardSpan({ id: "r", parent: "root", seq: 3, value: 0.5, feedback: "Too slow." }),
    ]);
    expect(view.finalReward).toBe(0.5);
    expect(view.feedback).toEqual(["Too slow."]);
    expect(view.conversations).toEqual([
      {
        messages: [...request.messages, response.choices[0]!.message],
        tools: request.tools,
        model: "m",
        spanId: "call",
        reward: 0.5,
      },
    ]);
  });

  it("reads gen_ai messages in the semconv parts format and the Vercel AI SDK's attributes", () => {
    const input = [
      { role: "user", parts: [{ type: "text", content: "weather?" }] },
      { role: "assistant", parts: [{ type: "tool_call", id: "t1", name: "lookup", arguments: { city: "Oslo" } }] },
      { role: "tool", parts: [{ type: "tool_call_response", id: "t1", result: { temp: 3 } }] },
    ];
    const view = spansToMessages([
      span({
        id: "g",
        seq: 1,
        attrs: {
          [sc.GEN_AI_OPERATION_NAME]: "chat",
          [sc.GEN_AI_INPUT_MESSAGES]: JSON.stringify(input),
          [sc.GEN_AI_OUTPUT_MESSAGES]: JSON.stringify([{ role: "assistant", parts: [{ type: "text", content: "Cold." }] }]),
        },
      }),
      span({
        id: "v",
        seq: 2,
        name: "ai.generateText.doGenerate",
        attrs: {
          [sc.AI_SDK_PROMPT_MESSAGES]: JSON.stringify([{ role: "user", content: [{ type: "text", text: "hi" }] }]),
          [sc.AI_SDK_RESPONSE_TOOL_CALLS]: JSON.stringify([{ toolCallId: "x", toolName: "greet", input: { to: "you" } }]),
          [sc.AI_SDK_MODEL_ID]: "gpt-x",
        },
      }),
    ]);
    expect(view.conversations[0]?.messages).toEqual([
      { role: "user", content: "weather?" },
      {
        role: "assistant",
        content: null,
        tool_calls: [{ id: "t1", type: "function", function: { name: "lookup", arguments: '{"city":"Oslo"}' } }],
      },
      { role: "tool", tool_call_id: "t1", content: '{"temp":3}' },
      { role: "assistant", content: "Cold." },
    ]);
    expect(view.conversations[1]).toMatchObject({
      model: "gpt-x",
      messages: [
        { role: "user", content: [{ type: "text", text: "hi" }] },
        {
          role: "assistant",
          content: null,
          tool_calls: [{ id: "x", type: "function", function: { name: "greet", arguments: '{"to":"you"}' } }],
        },
      ],
    });
  });
});
