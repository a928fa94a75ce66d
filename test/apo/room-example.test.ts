import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, cpSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, test } from "vitest";
import { answeredRoom, type BookingTask, expectedRoom, grade } from "../../examples/room-booking/rooms.js";
import { repo } from "./agl-cli.js";

const task = (extra: Partial<BookingTask>): BookingTask => ({
  id: "t",
  date: "2026-12-01",
  start: "10:30",
  duration_min: 60,
  attendees: 5,
  needs: [],
  accessible: false,
  busy: [],
  ...extra,
});
const load = (name: string) =>
  readFileSync(join(repo, "examples/room-booking", name), "utf8")
    .trim()
    .split("\n")
    .map((l) => JSON.parse(l) as BookingTask);

describe("the room-booking example", () => {
  test("house rules: fewest seats, then nearest, then name; none when nothing fits", () => {
    expect(expectedRoom(task({ attendees: 5 }))).toBe("Cove"); // Cove and Fern seat 6; Cove is nearer
    expect(expectedRoom(task({ attendees: 5, needs: ["video"] }))).toBe("Fern");
    expect(expectedRoom(task({ attendees: 3, busy: ["Birch"] }))).toBe("Cove");
    expect(expectedRoom(task({ attendees: 9, accessible: true, needs: ["whiteboard"] }))).toBe("Echo");
    expect(expectedRoom(task({ attendees: 21 }))).toBe("none");
  });

  test("answers are read from a ROOM: line, else the last room named", () => {
    expect(answeredRoom("Cove fits, but I pick Den.\nROOM: Fern")).toBe("Fern");
    expect(answeredRoom("I would book cove.")).toBe("Cove");
    expect(answeredRoom("Sorry, no room fits this request.")).toBe("none");
    expect(answeredRoom("ROOM: none")).toBe("none");
    expect(answeredRoom("I cannot tell.")).toBeUndefined();
  });

  test("the grader is deterministic and says why", () => {
    const t = task({ attendees: 5, needs: ["whiteboard"] });
    expect(grade(t, "ROOM: Cove")).toEqual({ reward: 1, feedback: "correct: Cove" });
    expect(grade(t, "ROOM: Grove")).toEqual({
      reward: 0.3,
      feedback: "chose Grove, which fits, but Cove should be preferred because it has fewer seats (6 vs 12)",
    });
    expect(grade(t, "ROOM: Birch")).toEqual({
      reward: 0,
      feedback: "chose Birch, but Birch seats 4, fewer than the 5 attendees; expected Cove",
    });
    expect(grade(t, "ROOM: none").reward).toBe(0);
    expect(grade(t, "hmm").feedback).toBe("no room named in the answer; expected Cove");
  });

  test("60 requests, 30 to train and 30 to validate, regenerated exactly by generate-tasks.ts", () => {
    const train = load("train.jsonl");
    const val = load("val.jsonl");
    expect(train).toHaveLength(30);
    expect(val).toHaveLength(30);
    expect(new Set([...train, ...val].map((t) => t.id)).size).toBe(60);
    const dir = mkdtempSync(join(tmpdir(), "agl-rooms-"));
    try {
      for (const f of ["rooms.ts", "generate-tasks.ts"]) cpSync(join(repo, "examples/room-booking", f), join(dir, f));
      execFileSync(process.execPath, ["--import", "tsx", join(dir, "generate-tasks.ts")], { cwd: repo, stdio: "pipe" });
      expect(readFileSync(join(dir, "train.jsonl"), "utf8")).toBe(readFileSync(join(repo, "examples/room-booking/train.jsonl"), "utf8"));
      expect(readFileSync(join(dir, "val.jsonl"), "utf8")).toBe(readFileSync(join(repo, "examples/room-booking/val.jsonl"), "utf8"));
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
