import { describe, expect, test } from "vitest";
import { defaultApoPrompts, extractTemplate, renderPrompt } from "./apo-prompts.js";
import { formatExperiments, meanReward, type RolloutOutcome } from "./rollout-outcome.js";

describe("renderPrompt", () => {
  test("fills every {{name}} once; substituted text is not re-read", () => {
    const messages = renderPrompt({ system: "S {{a}}", user: "U {{a}} {{b}} {{missing}}" }, { a: "{{b}}", b: "B" });
    expect(messages).toEqual([
      { role: "system", content: "S {{b}}" },
      { role: "user", content: "U {{b}} B {{missing}}" },
    ]);
  });
  test("the default prompts use the documented names", () => {
    for (const v of defaultApoPrompts.critique) expect(v.user).toContain("{{experiments}}");
    for (const v of defaultApoPrompts.edit) expect(v.user).toContain("{{critique}}");
  });
});

describe("extractTemplate", () => {
  test("takes a fenced block, a <template> wrapper, or the trimmed answer", () => {
    expect(extractTemplate("Here:\n```text\nHello {q}\n```\nDone")).toBe("Hello {q}");
    expect(extractTemplate("<template>\nHi {q}\n</template>")).toBe("Hi {q}");
    expect(extractTemplate("  Hi {q}\n")).toBe("Hi {q}");
  });
});

describe("formatExperiments", () => {
  const run = (i: number, reward: number | undefined, extra: Partial<RolloutOutcome> = {}): RolloutOutcome => ({
    rolloutId: `ro-${i}`,
    taskIndex: i,
    input: { i },
    status: "succeeded",
    reward,
    feedback: [],
    conversations: [],
    ...extra,
  });
  test("worst first, with feedback, errors and each message once", () => {
    const text = formatExperiments([
      run(0, 1),
      run(1, 0, {
        feedback: ["expected X"],
        conversations: [
          [
            { role: "user", content: "hi" },
            { role: "assistant", content: "yo" },
          ],
          [
            { role: "user", content: "hi" },
            { role: "assistant", content: "again" },
          ],
        ],
      }),
      run(2, undefined, { status: "failed", error: "boom" }),
    ]);
    expect(text.indexOf('Task: {"i":1}')).toBeLessThan(text.indexOf('Task: {"i":0}'));
    expect(text).toContain("reward none (counts as 0), failed");
    expect(text).toContain("Error: boom");
    expect(text).toContain("Grader feedback: expected X");
    expect(text.match(/\[user\] hi/g)).toHaveLength(1);
    expect(text).toContain("[assistant] again");
  });
  test("long runs are cut, best-scored first", () => {
    const long = "x".repeat(5_000);
    const text = formatExperiments([run(0, 1, { feedback: [long] }), run(1, 0, { feedback: [long] })], {
      maxMessageChars: 3_000,
      maxTotalChars: 4_000,
    });
    expect(text).toContain("more characters");
    expect(text).toContain("1 better-scored runs left out");
    expect(meanReward([run(0, 1), run(1, undefined)])).toBe(0.5);
  });
});
