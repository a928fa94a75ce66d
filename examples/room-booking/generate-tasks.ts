/**
 * Writes the example's datasets: 60 booking requests from a fixed seed, 30 for training and 30 for validation.
 * `npx tsx examples/room-booking/generate-tasks.ts` reproduces train.jsonl and val.jsonl exactly.
 */
import { writeFileSync } from "node:fs";
import { type BookingTask, expectedRoom, ROOMS } from "./rooms.js";

let state = 20_261_129;
const random = () => {
  state = (Math.imul(state, 1_103_515_245) + 12_345) >>> 0;
  return state / 2 ** 32;
};
const pick = <T>(items: readonly T[]) => items[Math.floor(random() * items.length)] as T;

const tasks: BookingTask[] = [];
while (tasks.length < 60) {
  const needs = ["projector", "video", "whiteboard"].filter(() => random() < 0.35);
  const task: BookingTask = {
    id: `b${String(tasks.length + 1).padStart(2, "0")}`,
    date: `2026-12-${String(1 + Math.floor(random() * 20)).padStart(2, "0")}`,
    start: pick(["09:00", "10:30", "13:00", "14:30", "16:00"]),
    duration_min: pick([30, 45, 60, 90]),
    attendees: pick([2, 3, 4, 5, 6, 7, 8, 9, 11, 14, 18, 22]),
    needs,
    accessible: random() < 0.3,
    busy: ROOMS.filter(() => random() < 0.3).map((r) => r.name),
  };
  // Keep "nothing fits" to about one request in eight.
  if (expectedRoom(task) === "none" && tasks.filter((t) => expectedRoom(t) === "none").length >= 7) continue;
  tasks.push(task);
}
const jsonl = (items: BookingTask[]) => `${items.map((t) => JSON.stringify(t)).join("\n")}\n`;
const dir = new URL(".", import.meta.url);
writeFileSync(new URL("train.jsonl", dir), jsonl(tasks.slice(0, 30)));
writeFileSync(new URL("val.jsonl", dir), jsonl(tasks.slice(30)));
const counts = new Map<string, number>();
for (const t of tasks) counts.set(expectedRoom(t), (counts.get(expectedRoom(t)) ?? 0) + 1);
console.log(`wrote 30 + 30 tasks; expected answers: ${[...counts].map(([k, v]) => `${k} ${v}`).join(", ")}`);
