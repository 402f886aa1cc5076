"""Invented names for the generated world: pronounceable, unique, and unknown to any model.

Names are built from random syllables rather than drawn from a list of real words, so no
pretrained encoder or language model has seen them: the situation of an enterprise wiki full
of internal codenames, and of BRIT's Named Entity Anonymization.
"""

from __future__ import annotations

import random

_ONSETS = ("b", "d", "f", "g", "k", "l", "m", "n", "p", "r", "s", "t", "v", "z",
           "b", "d", "k", "l", "m", "n", "r", "s", "t", "v",
           "br", "dr", "kr", "tr", "th", "st", "vr", "sh", "gl", "pl")
_VOWELS = ("a", "e", "i", "o", "u", "a", "e", "i", "o", "u", "ae", "io", "ei", "y")
_CODAS = ("", "", "", "n", "r", "l", "s", "x", "nd", "rk", "m")

# Suffixes that say what kind of thing a name denotes (an organisation, a site, an event).
ORG_SUFFIXES = ("Labs", "Systems", "Works", "Dynamics", "Collective", "Industries", "Group")
PLACE_SUFFIXES = ("Campus", "Works", "Yard", "Hall", "Park", "Centre", "Quarter")
EVENT_SUFFIXES = ("Expo", "Summit", "Showcase", "Forum", "Fair")
MODEL_SUFFIXES = ("X1", "X2", "S", "Pro", "Mini", "Max", "One", "Neo", "3", "7", "200", "500")


def word(rng: random.Random, syllables: tuple[int, int] = (2, 2)) -> str:
    """One capitalised invented word of a few syllables."""
    n = rng.randint(*syllables)
    parts = [rng.choice(_ONSETS) + rng.choice(_VOWELS) for _ in range(n)]
    parts.append(rng.choice(_CODAS))
    return "".join(parts).capitalize()


class NameBook:
    """Hands out invented names, never the same name (or name word) twice."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.used_words: set[str] = set()
        self.used_names: set[str] = set()

    def _fresh_word(self, syllables: tuple[int, int] = (2, 2)) -> str:
        for _ in range(10_000):
            w = word(self.rng, syllables)
            if 4 <= len(w) <= 9 and w.lower() not in self.used_words:
                self.used_words.add(w.lower())
                return w
        raise RuntimeError("name space exhausted: lower the number of entities in params world")

    def _claim(self, name: str) -> str:
        self.used_names.add(name)
        return name

    def product(self) -> str:
        """A product codename with a model suffix, e.g. 'Vorkel X2'."""
        return self._claim(f"{self._fresh_word()} {self.rng.choice(MODEL_SUFFIXES)}")

    def person(self) -> str:
        """A first and a last name."""
        return self._claim(f"{self._fresh_word((2, 2))} {self._fresh_word((2, 3))}")

    def organisation(self) -> str:
        return self._claim(f"{self._fresh_word()} {self.rng.choice(ORG_SUFFIXES)}")

    def place(self) -> str:
        return self._claim(f"{self._fresh_word()} {self.rng.choice(PLACE_SUFFIXES)}")

    def event(self, year: int) -> str:
        return self._claim(f"{self._fresh_word()} {self.rng.choice(EVENT_SUFFIXES)} {year}")

    def city(self) -> str:
        return self._claim(self._fresh_word((2, 3)))

    def alias(self) -> str:
        """An anonymized stand-in name (Named Entity Anonymization), e.g. 'Project Tharo'."""
        return self._claim(f"{self.rng.choice(('Project', 'Unit', 'Codename'))} {self._fresh_word()}")
