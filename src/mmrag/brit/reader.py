"""Readers: turn a retrieved context and the options of a multiple-choice question into an answer.

- :class:`SimilarityReader` (offline default, deterministic). Each option is scored against the
  evidence in both modalities: text evidence by the text encoder's cosine similarity between
  "question + option" and each retrieved sentence (best sentence wins), image evidence by CLIP's
  similarity between the option and each retrieved image (best image wins). Scores are
  standardised across the options within each modality (z-scores), weighted and summed; a
  modality with no evidence contributes nothing. It reads what CLIP and the text encoder can read
  — attributes, entity-name overlap — and nothing more; its ceiling (accuracy when handed the
  gold evidence) is reported beside every result.
- :class:`LMMReader` (the paper's): any OpenAI-compatible chat model; triplet sentences joined
  by a delimiter, the images as base64 data URLs with their captions, and the lettered options;
  the reply's first option letter is the answer.
- :class:`LLMReader` (the default): a text-only ladder model through the generation service
  (``mmrag.models.generation``); the retrieved triplet sentences / chunks as a list of facts, each
  retrieved picture as its caption (plus, where the corpus records them, the attributes it shows:
  a perfect picture reader standing in for the paper's LMM vision; the question's own picture
  too, where it has one), and the options; the reply copies one (:func:`copied_choice`: small
  ladder models asked for a letter answer "A" far too often). ``answer_many`` sends every
  question in one call (the llama.cpp engine runs them concurrently over its slots).

Both also answer open questions (no choices, as a user's folder corpus has) with
``answer_open``: the similarity reader ranks the context items (retrieved triplet sentences, node
names, image captions) by similarity to the question, skipping items the question itself contains,
and answers with a short span of the best ones (:func:`short_span`: a number with its unit for
"how many / how long / when", else a capitalised name the question does not already say, else the
words of the item the question does not contain) — never a whole triplet such as "Ray Charles be
since age of 16", which would make exact match 0 by construction; the LMM reader asks for a short
free-text answer.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np

DELIM = " | "
LETTERS = "ABCDEFGH"


def _z(x: np.ndarray) -> np.ndarray:
    s = x.std()
    return (x - x.mean()) / s if s > 1e-9 else np.zeros_like(x)


@dataclass
class SimilarityReader:
    """Offline multiple-choice reader (see the module docstring)."""

    text_encode: Callable[[list[str]], np.ndarray]
    clip: Any
    root: Path
    w_text: float
    w_image: float
    image_emb: dict[str, np.ndarray] | None = None  # precomputed CLIP image embeddings by id
    image_paths: dict[str, str] | None = None
    captions: dict[str, str] | None = None  # image captions: candidates of open answers

    def scores(self, question: str, choices: list[str], texts: list[str],
               images: list[str]) -> np.ndarray:
        """One score per option (higher is better)."""
        total = np.zeros(len(choices))
        texts = [t for t in texts if t.strip()]
        if texts and self.w_text:
            ev = self.text_encode(texts)
            opts = self.text_encode([f"{question} {c}" for c in choices])
            total += self.w_text * _z((opts @ ev.T).max(axis=1))
        if images and self.w_image:
            iv = np.stack([self._image(i) for i in images])
            ov = self.clip.encode_texts(list(choices))
            total += self.w_image * _z((ov @ iv.T).max(axis=1))
        return total

    def _image(self, image_id: str) -> np.ndarray:
        if self.image_emb is not None and image_id in self.image_emb:
            return self.image_emb[image_id]
        if self.image_paths is None or image_id not in self.image_paths:
            raise KeyError(f"reader: no embedding or path for image {image_id}")
        return self.clip.encode_images([self.root / self.image_paths[image_id]])[0]

    def answer(self, question: str, choices: list[str], texts: list[str], images: list[str]) -> str:
        """The best-scoring option (first one on ties)."""
        if not choices:
            raise ValueError("SimilarityReader answers multiple-choice questions only (no choices)")
        s = self.scores(question, choices, texts, images)
        return choices[int(np.argmax(s))]

    def answer_open(self, question: str, texts: list[str], images: list[str]) -> str:
        """A free-text answer: the retrieved text or image caption most similar to the question
        (first one on ties), ignoring any the question already contains; "" with no context."""
        q_norm = f" {_plain(question)} "
        cands = list(dict.fromkeys(t.strip() for t in list(texts) + [
            (self.captions or {}).get(i, "") for i in images] if t.strip()))
        cands = [c for c in cands if f" {_plain(c)} " not in q_norm]
        if not cands:
            return ""
        sims = self.text_encode(cands) @ self.text_encode([question])[0]
        ranked = [cands[i] for i in np.argsort(-sims, kind="stable")]
        for cand in ranked[:SPAN_ITEMS]:
            span = short_span(question, cand)
            if span:
                return span
        return remainder(question, ranked[0]) or ranked[0]


def _plain(text: str) -> str:
    """Lower-case words only (for 'the question already says it')."""
    return " ".join(re.findall(r"\w+", text.lower()))


SPAN_ITEMS = 3  # best context items searched for a typed span before falling back to the best one
_NUMERIC_Q = re.compile(r"^\s*(how (many|much|long|old|far|tall|high|big)|when|(in |at )?(what|which) (year|age))\b",
                        re.I)
_NUMBER = re.compile(r"\b\d[\d,.]*(?:\s+(?!and\b|in\b|of\b|the\b)[a-z]+)?")
_NAME = re.compile(r"[A-Z][\w'\-]*(?:\s+(?:of\s+|de\s+|the\s+)?[A-Z0-9][\w'\-]*)*")
_LEADING = {"The", "A", "An", "It", "Its", "In", "On", "At", "He", "She", "They", "This", "That"}
# words a remainder span does not start or end with (a triplet's verb and prepositions)
_GLUE = {"a", "an", "the", "be", "is", "are", "was", "were", "has", "have", "had", "in", "on", "at", "of",
         "to", "by", "for", "from", "with", "since", "as", "and", "or"}


def short_span(question: str, text: str) -> str | None:
    """A short answer span of ``text`` the question does not already say: a number (with the unit
    after it) for a how-many / how-long / when question, else the first capitalised name; None if
    there is none."""
    said = f" {_plain(question)} "

    def new(span: str) -> bool:
        return bool(_plain(span)) and f" {_plain(span)} " not in said

    nums = [m.group(0).strip().rstrip(".,") for m in _NUMBER.finditer(text)]
    if re.search(r"\b(when|year|age|old)\b", question, re.I):
        nums = [n.split()[0].rstrip(".,") for n in nums]
    nums = [n.split()[0] if len(n.split()) > 1 and f" {_plain(n.split()[1])} " in said else n for n in nums]
    nums = [n for n in nums if new(n)]
    if _NUMERIC_Q.search(question):
        return nums[0] if nums else None
    names = []
    for m in _NAME.finditer(text):
        words = m.group(0).split()
        while words and words[0] in _LEADING:
            words = words[1:]
        if words:
            names.append(" ".join(words))
    hits = [n for n in names if new(n) and not all(f" {w} " in said for w in _plain(n).split())]
    return hits[0] if hits else (nums[0] if nums else None)


def remainder(question: str, text: str, max_words: int = 5) -> str:
    """The longest run of ``text``'s words that the question does not contain (at most ``max_words``)."""
    said = set(_plain(question).split())
    runs, cur = [], []
    for w in text.split():
        if _plain(w) and _plain(w) not in said:
            cur.append(w)
        else:
            runs.append(cur)
            cur = []
    runs.append(cur)
    trimmed = []
    for run in runs:
        while run and _plain(run[0]) in _GLUE:
            run = run[1:]
        while run and _plain(run[-1]) in _GLUE:
            run = run[:-1]
        trimmed.append(run)
    best = max(trimmed, key=len)
    return " ".join(best[:max_words]).strip(" .,;:")


def prompt_messages(question: str, choices: list[str], texts: list[str], images: list[str],
                    captions: dict[str, str], image_paths: dict[str, str], root: Path
                    ) -> list[dict[str, Any]]:
    """The LMM prompt: triplets joined by a delimiter, images (base64) with captions, options."""
    from mmrag.models.llm import image_part

    task = "the multiple-choice question" if choices else "the question"
    parts: list[dict[str, Any]] = [{"type": "text", "text":
                                    f"Answer {task} using the context.\n"
                                    f"Facts: {DELIM.join(texts) if texts else '(none)'}"}]
    for i in images:
        parts.append(image_part(root / image_paths[i]))
        parts.append({"type": "text", "text": f"Image {i}: {captions.get(i, '')}"})
    if not choices:
        parts.append({"type": "text", "text": f"Question: {question}\n"
                                              "Reply with the answer only, in a few words."})
        return [{"role": "user", "content": parts}]
    opts = "\n".join(f"{LETTERS[k]}. {c}" for k, c in enumerate(choices))
    parts.append({"type": "text", "text": f"Question: {question}\n{opts}\n"
                                          "Reply with the letter of the correct option only."})
    return [{"role": "user", "content": parts}]


def parse_choice(reply: str, choices: list[str]) -> str | None:
    """The option a reply picks: a leading letter, else an option quoted verbatim; None if neither."""
    m = re.search(r"\b([A-H])\b", reply.strip()[:20])
    if m and LETTERS.index(m.group(1)) < len(choices):
        return choices[LETTERS.index(m.group(1))]
    hits = [c for c in choices if c.lower() in reply.lower()]
    return hits[0] if len(hits) == 1 else None


@dataclass
class LMMReader:
    """Any OpenAI-compatible LMM (models/llm.py OpenAIChat); unparseable replies are counted."""

    llm: Any
    captions: dict[str, str]
    image_paths: dict[str, str]
    root: Path
    unparsed: int = 0

    def answer(self, question: str, choices: list[str], texts: list[str], images: list[str]) -> str:
        msgs = prompt_messages(question, choices, texts, images, self.captions, self.image_paths, self.root)
        reply = self.llm.generate([msgs], max_new_tokens=8)[0].text
        pick = parse_choice(reply, choices)
        if pick is None:
            self.unparsed += 1
            return ""
        return pick

    def answer_open(self, question: str, texts: list[str], images: list[str]) -> str:
        """A short free-text answer (the reply's first non-empty line)."""
        msgs = prompt_messages(question, [], texts, images, self.captions, self.image_paths, self.root)
        reply = self.llm.generate([msgs], max_new_tokens=32)[0].text
        lines = [ln.strip() for ln in reply.strip().splitlines() if ln.strip()]
        if not lines:
            self.unparsed += 1
            return ""
        return lines[0]


# the LLM reader: a fixed system message first (the engine's prompt cache reuses it), the context
# capped so that any prompt fits a slot
LLM_SYSTEM = ("You answer multiple-choice questions about a company wiki using only the facts and "
              "pictures listed. Reply with the correct option, copied exactly, and nothing else.")
LLM_OPEN_SYSTEM = ("You answer questions about a company wiki using only the facts and pictures "
                   "listed. Reply with the answer only, in a few words.")
CHOICE_TOKENS = 12  # an option copied (small models pick letter "A" far too often: they copy better)
OPEN_TOKENS = 24
MAX_CONTEXT_WORDS = 400  # facts beyond this are dropped (retrieval order is kept): ~2x the baselines' budget


def image_descriptions(captions: dict[str, str], attributes: dict[str, dict[str, str]] | None
                       ) -> dict[str, str]:
    """What the text-only reader is told each picture shows: its caption, then the attributes the
    corpus records for it (``images.jsonl``'s ``attributes``), where there are any."""
    out = {}
    for i, cap in captions.items():
        attrs = (attributes or {}).get(i) or {}
        shown = "; ".join(f"{k.replace('_', ' ')}: {v}" for k, v in sorted(attrs.items()))
        out[i] = (cap.strip() or "(no caption)") + (f" It shows {shown}." if shown else "")
    return out


def llm_messages(question: str, choices: list[str], texts: list[str], images: list[str],
                 image_text: dict[str, str], query_image: str | None = None) -> list[dict[str, str]]:
    """The LLM reader's chat: facts (capped at MAX_CONTEXT_WORDS), pictures, the question's own
    picture (described the same way) where it has one, question, options."""
    facts, n = [], 0
    for t in dict.fromkeys(t.strip() for t in texts if t.strip()):
        n += len(t.split())
        if facts and n > MAX_CONTEXT_WORDS:
            break
        facts.append(f"- {t}")
    pics = [f"- Picture {k + 1}: {image_text.get(i, '(no caption)')}" for k, i in enumerate(images)]
    parts = [f"Facts:\n{chr(10).join(facts) if facts else '(none)'}",
             f"Pictures:\n{chr(10).join(pics) if pics else '(none)'}",
             f"Question: {question}"]
    if query_image:
        parts.insert(2, f"The picture the question shows: {image_text.get(query_image, '(no description)')}")
    if choices:
        parts.append("Options:\n" + "\n".join(f"- {c}" for c in choices))
        parts.append("Answer (one option, copied exactly):")
    system = LLM_SYSTEM if choices else LLM_OPEN_SYSTEM
    return [{"role": "system", "content": system}, {"role": "user", "content": "\n\n".join(parts)}]


def copied_choice(reply: str, choices: list[str]) -> str | None:
    """The option a reply copies: the reply's first line equal to an option (case and trailing
    punctuation aside), else the one option it contains (the longest when one contains another),
    else a leading option letter; None if none."""
    line = next((ln.strip(" .*-\"'`") for ln in reply.strip().splitlines() if ln.strip()), "")
    for c in choices:
        if line.lower() == c.lower():
            return c
    hits = [c for c in choices if c.lower() in line.lower()]
    hits = [c for c in hits if not any(c != o and c.lower() in o.lower() for o in hits)]
    if len(hits) == 1:
        return hits[0]
    return parse_choice(reply, choices)


@dataclass
class LLMReader:
    """A ladder LLM reading a multiple-choice prompt (see the module docstring); replies that name
    no option are counted in ``unparsed`` and answered "" (wrong)."""

    llm: Any  # generate(conversations, max_new_tokens=, temperature=) -> [.text]
    image_text: dict[str, str]  # image id -> its description (:func:`image_descriptions`)
    unparsed: int = 0
    prompts: int = 0

    @property
    def name(self) -> str:
        return str(getattr(self.llm, "name", "llm"))

    def answer_many(self, items: list[tuple[Any, ...]]) -> list[str]:
        """Answers of (question, choices, texts, images[, query image id]) items: one engine call
        per item type (multiple-choice, open), every question of a type at once."""
        out = [""] * len(items)
        for with_choices, tokens in ((True, CHOICE_TOKENS), (False, OPEN_TOKENS)):
            idx = [k for k, it in enumerate(items) if bool(it[1]) == with_choices]
            if not idx:
                continue
            convs = [llm_messages(*items[k][:4], self.image_text, *items[k][4:5]) for k in idx]
            gens = self.llm.generate(convs, max_new_tokens=tokens, temperature=0.0)
            self.prompts += len(convs)
            for k, g in zip(idx, gens):
                choices = items[k][1]
                if choices:
                    pick = copied_choice(g.text, choices)
                    out[k] = pick or ""
                else:
                    lines = [ln.strip() for ln in g.text.strip().splitlines() if ln.strip()]
                    out[k] = lines[0] if lines else ""
                    pick = out[k] or None
                self.unparsed += pick is None
        return out

    def answer(self, question: str, choices: list[str], texts: list[str], images: list[str]) -> str:
        return self.answer_many([(question, choices, texts, images)])[0]

    def answer_open(self, question: str, texts: list[str], images: list[str]) -> str:
        return self.answer_many([(question, [], texts, images)])[0]


def read_all(reader: Any, items: list[tuple[Any, ...]]) -> list[str]:
    """Every item's answer — items are (question, choices, texts, images[, query image id]) —
    in one batch where the reader can (``answer_many``), else one by one (multiple-choice with
    ``answer``, open with ``answer_open`` where the reader has it; no query image)."""
    if reader is None:
        return [""] * len(items)
    if hasattr(reader, "answer_many"):
        return reader.answer_many(items)
    out = []
    for question, choices, texts, images, *_ in items:
        if choices:
            out.append(reader.answer(question, choices, texts, images))
        elif hasattr(reader, "answer_open"):
            out.append(reader.answer_open(question, texts, images))
        else:
            out.append("")
    return out
