import type { CalculatorTask } from "./agent.js";

/** A few calculator tasks for the examples. */
export const tasks: CalculatorTask[] = [
  { question: "What is 12 * 7?", answer: 84 },
  { question: "What is 1000 - 1?", answer: 999 },
  { question: "What is 81 / 9?", answer: 9 },
];
