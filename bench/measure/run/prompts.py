"""Synthetic prompts of a chosen input length, salted so the prefix cache cannot inflate results.

Prompts are built from common English words that nearly every tokenizer maps to one token each
(with their leading space), so the prompt length in tokens is ``overhead + words`` with an
``overhead`` (chat template, salt, instruction) that two calibration requests measure against
the server's own usage counts. Every request starts with the run's salt, then its own index:
the requests of one run share the chat template and the salt's eight words, so a prefix cache
can serve no more than that of a prompt (the agent workload adds a system prompt its sessions
share on purpose), and two runs, whose salts differ, share the chat template alone.
"""

from __future__ import annotations

import random
import secrets
from dataclasses import dataclass

from bench.errors import ConfigError

VOCABULARY = tuple(
    (  # noqa: SIM905 (rows of words read better than a 140-line literal)
        "the of and to in is was for on are with as by at be this from or have an they which one you were "
        "all we her she there would their will when who him been has more if no out do so can what up said "
        "about other into than its time only could new them man some these then two first may any like now "
        "my such make over our even most me state after also made many did must before back see through way "
        "where get much go well your know should down work year because come people just say each those take "
        "day good how long little use us very great old world own off right here still life find last place "
        "give same while part house"
    ).split()
)
INSTRUCTION = "Continue this text."


def new_salt() -> str:
    """A fresh per-run salt: eight vocabulary words chosen by the OS random source."""
    return " ".join(secrets.choice(VOCABULARY) for _ in range(8))


@dataclass(frozen=True, slots=True)
class PromptFactory:
    """Builds the messages of request ``index`` with ``words`` filler words after the salt."""

    salt: str
    seed: int = 0

    def messages(self, index: int, words: int) -> list[dict[str, str]]:
        generator = random.Random(f"{self.seed}:{index}")
        filler = " ".join(generator.choice(VOCABULARY) for _ in range(max(words, 0)))
        # The index goes first, after the salt, so even request 0 and 1 differ from their first words.
        tag = " ".join(VOCABULARY[(index // len(VOCABULARY) ** power) % len(VOCABULARY)] for power in range(3))
        return [{"role": "user", "content": f"{self.salt} {tag} {filler}\n{INSTRUCTION}"}]


@dataclass(frozen=True, slots=True)
class Calibration:
    """Prompt tokens = overhead + slope x words, measured on the server."""

    overhead: float
    slope: float

    def words_for(self, input_tokens: int) -> int:
        words = round((input_tokens - self.overhead) / self.slope)
        if words < 1:
            raise ConfigError(
                f"--input-tokens: {input_tokens} is below this endpoint's fixed prompt overhead "
                f"({self.overhead:.0f} tokens of chat template, salt and instruction)"
            )
        return words

    @classmethod
    def from_probes(cls, first: tuple[int, int], second: tuple[int, int]) -> Calibration:
        """From two (words, prompt_tokens) measurements of the same prompt shape."""
        (w1, p1), (w2, p2) = first, second
        if w2 == w1 or p2 == p1:
            raise ConfigError("prompt calibration failed: the server's prompt_tokens did not grow with the prompt")
        slope = (p2 - p1) / (w2 - w1)
        return cls(overhead=p1 - slope * w1, slope=slope)
