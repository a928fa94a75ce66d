"""The demo task: name the category of a word. The prompt is ``kind of fox ?``; the answer repeats the word, then
names its category: ``fox animal``. Six categories; the 24 words belong to four of them (six words each), and
``tool`` and ``place`` have none here.

The supervised warm-up teaches only the answer format (the word, then one of the six categories drawn at random, then
the end token), so the warmed-up model scores about 1/6; which word belongs to which category comes from RL alone.
Six answers rather than four put chance well below the demo's first-step bound of 0.3 (at 1/4, 64 draws exceed it
15 % of the time); the two empty categories are wrong for every word, so RL unlearns them for all words at once.
The reward is 1 for exactly the right answer, else 0 (the TypeScript demo agent computes the same)."""

from __future__ import annotations

import random
from typing import Any

__all__ = [
    "CATEGORIES",
    "LABELS",
    "expected_answer",
    "format_prompt",
    "make_tasks",
    "reward",
    "vocabulary",
    "warmup_pairs",
]

CATEGORIES: dict[str, list[str]] = {
    "color": ["red", "blue", "green", "pink", "gray", "gold"],
    "animal": ["cat", "dog", "fox", "owl", "bee", "cow"],
    "number": ["one", "two", "six", "ten", "nine", "four"],
    "food": ["rice", "corn", "pear", "fig", "soup", "cake"],
}
# Every category an answer may name: the four above and two without words.
LABELS = [*CATEGORIES, "tool", "place"]
PROMPT_WORDS = ["kind", "of", "?"]


def vocabulary() -> list[str]:
    """Every word a prompt or an answer uses."""
    return [*PROMPT_WORDS, *LABELS, *(w for words in CATEGORIES.values() for w in words)]


def make_tasks(count: int, seed: int = 0) -> list[dict[str, Any]]:
    """``count`` tasks ``{"word", "answer"}``, deterministic for a seed. Each run of four consecutive tasks has one
    word of every category (in random order), so any batch of a multiple of four tasks is balanced: a policy that
    ignores the word gains nothing from a batch, only reading the word pays."""
    rng = random.Random(seed)
    tasks: list[dict[str, Any]] = []
    while len(tasks) < count:
        block = [{"word": rng.choice(words), "answer": category} for category, words in CATEGORIES.items()]
        rng.shuffle(block)
        tasks.extend(block)
    return tasks[:count]


def format_prompt(task: dict[str, Any]) -> str:
    return f"kind of {task['word']} ?"


def expected_answer(task: dict[str, Any]) -> str:
    return f"{task['word']} {task['answer']}"


def reward(task: dict[str, Any], answer: str) -> float:
    return 1.0 if " ".join(answer.split()) == expected_answer(task) else 0.0


def warmup_pairs(count: int, seed: int = 1) -> list[tuple[str, str]]:
    """Format-only warm-up data: each prompt answered with its word and one of ``LABELS`` drawn at random (right only
    by chance)."""
    rng = random.Random(seed)
    return [(format_prompt(t), f"{t['word']} {rng.choice(LABELS)}") for t in make_tasks(count, seed)]
