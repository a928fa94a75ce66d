/**
 * The room-booking task: pick the meeting room for a booking under hard constraints (free at that time, enough seats,
 * the equipment asked for, wheelchair access when required) and the office's house rules for choosing among the
 * rooms that fit (fewest seats, then nearest, then alphabetical). The grader is deterministic and explains itself.
 */

export interface Room {
  name: string;
  seats: number;
  equipment: readonly string[];
  accessible: boolean;
  /** Walking distance from reception. */
  distanceM: number;
}

/** One booking request. `busy` lists the rooms already taken at that time. */
export interface BookingTask {
  id: string;
  date: string;
  start: string;
  duration_min: number;
  attendees: number;
  needs: string[];
  accessible: boolean;
  busy: string[];
}

export const ROOMS: readonly Room[] = [
  { name: "Atrium", seats: 20, equipment: ["projector", "video"], accessible: true, distanceM: 40 },
  { name: "Birch", seats: 4, equipment: ["whiteboard"], accessible: false, distanceM: 10 },
  { name: "Cove", seats: 6, equipment: ["projector", "whiteboard"], accessible: true, distanceM: 25 },
  { name: "Den", seats: 8, equipment: ["video", "whiteboard"], accessible: false, distanceM: 15 },
  { name: "Echo", seats: 10, equipment: ["projector", "video", "whiteboard"], accessible: true, distanceM: 60 },
  { name: "Fern", seats: 6, equipment: ["video"], accessible: true, distanceM: 30 },
  { name: "Grove", seats: 12, equipment: ["projector", "whiteboard"], accessible: false, distanceM: 20 },
];

/** Why `room` cannot host `task`, or undefined when it can. */
export function violation(room: Room, task: BookingTask): string | undefined {
  if (task.busy.includes(room.name)) return `${room.name} is already booked at ${task.start}`;
  if (room.seats < task.attendees) return `${room.name} seats ${room.seats}, fewer than the ${task.attendees} attendees`;
  const missing = task.needs.filter((n) => !room.equipment.includes(n));
  if (missing.length > 0) return `${room.name} has no ${missing.join(" or ")}`;
  if (task.accessible && !room.accessible) return `${room.name} is not wheelchair accessible`;
  return undefined;
}

/** The rooms that fit, best first by the house rules: fewest seats, then nearest, then name. */
export function rankedRooms(task: BookingTask): Room[] {
  return ROOMS.filter((r) => violation(r, task) === undefined).sort(
    (a, b) => a.seats - b.seats || a.distanceM - b.distanceM || a.name.localeCompare(b.name),
  );
}

/** The right answer: a room name, or "none". */
export const expectedRoom = (task: BookingTask) => rankedRooms(task)[0]?.name ?? "none";

/** The room table as the agent shows it to the model. */
export function roomTable(task: BookingTask): string {
  return ROOMS.map(
    (r) =>
      `- ${r.name}: ${r.seats} seats; ${r.equipment.join(", ")}; ${r.accessible ? "wheelchair accessible" : "not accessible"}; ` +
      `${r.distanceM} m from reception; ${task.busy.includes(r.name) ? "BOOKED" : "free"} at ${task.start}`,
  ).join("\n");
}

/** The room an answer names: the last `ROOM: X` line, else the last room (or "none") mentioned. */
export function answeredRoom(answer: string): string | undefined {
  const tagged = [...answer.matchAll(/ROOM:\s*\**\s*([A-Za-z]+)/gi)].at(-1)?.[1];
  const pick = (word: string) =>
    /^(none|no)$/i.test(word) ? "none" : ROOMS.find((r) => r.name.toLowerCase() === word.toLowerCase())?.name;
  if (tagged) return pick(tagged);
  const names = [...answer.matchAll(/\b([A-Za-z]+)\b/g)]
    .map((m) => (/^no room$/i.test(m[1] ?? "") ? "none" : pick(m[1] ?? "")))
    .filter(Boolean);
  if (/\bno (suitable )?room\b/i.test(answer)) names.push("none");
  return names.at(-1);
}

/**
 * Grades an answer: 1 for the right room (or "none" when nothing fits), 0.3 for a room that fits but breaks the house
 * rules, 0 otherwise; the feedback says why, as a person reviewing the booking would.
 */
export function grade(task: BookingTask, answer: string): { reward: number; feedback: string } {
  const expected = expectedRoom(task);
  const chosen = answeredRoom(answer);
  if (chosen === undefined) return { reward: 0, feedback: `no room named in the answer; expected ${expected}` };
  if (chosen === expected) return { reward: 1, feedback: `correct: ${expected}` };
  if (chosen === "none") return { reward: 0, feedback: `answered that no room fits, but ${expected} fits` };
  const room = ROOMS.find((r) => r.name === chosen) as Room;
  const why = violation(room, task);
  if (why)
    return { reward: 0, feedback: `chose ${chosen}, but ${why}; expected ${expected === "none" ? "no room (nothing fits)" : expected}` };
  const best = ROOMS.find((r) => r.name === expected) as Room;
  const rule =
    best.seats < room.seats
      ? `it has fewer seats (${best.seats} vs ${room.seats})`
      : best.distanceM < room.distanceM
        ? `it seats the same and is nearer (${best.distanceM} m vs ${room.distanceM} m)`
        : "it comes first alphabetically among equal rooms";
  return { reward: 0.3, feedback: `chose ${chosen}, which fits, but ${expected} should be preferred because ${rule}` };
}
