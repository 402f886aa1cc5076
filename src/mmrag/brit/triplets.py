"""Text -> <subject, relation, object> triplets, the edges of BRIT's textual graphs.

Two extractors behind one call, ``extract(text, pronoun_entity) -> [Triplet]``:

- :class:`SpacyTriplets` (default, offline, deterministic): dependency-based open information
  extraction. Named entities and noun chunks are merged into single tokens first, so an
  argument is a whole name ("Vantor X2"), not its last word. For every verb, its subjects
  (``nsubj``/``nsubjpass``, inherited through verb conjunctions and relative clauses) are paired
  with its objects (``dobj``/``attr``/``oprd``/``dative``, prepositional objects through
  ``prep``/``agent`` with the preposition kept in the relation). Subjects and objects must be
  named entities (spaCy NER) or proper-noun chunks, as in the paper; a third-person pronoun
  subject resolves to the page's own entity (the title), the cheapest coreference that works on
  encyclopedic pages.
- :class:`LLMTriplets` (the paper's choice): an LLM behind ``models/llm.py`` writes one
  ``subject | relation | object`` per line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Iterable

PRONOUNS = {"it", "he", "she", "they", "its", "his", "her", "their", "this", "which", "who",
            "that", "whom"}
RELATIVE = {"who", "which", "that", "whom"}
SUBJ_DEPS = {"nsubj", "nsubjpass"}
OBJ_DEPS = {"dobj", "attr", "oprd", "dative"}
_DETS = re.compile(r"^(the|a|an|this|that|these|those)\s+", re.I)


@dataclass(frozen=True)
class Triplet:
    """One fact: subject and object are entity names, relation a short verb phrase."""

    subject: str
    relation: str
    object: str
    doc_id: str = ""
    section_id: str | None = None
    page: int | None = None
    source: str = "section"  # section | caption
    # the fact as the page wrote it ("Dear Brother is a duet by Audrey Williams"): the reader's text;
    # "" (graphs saved before it existed): the lemma form stands in
    surface: str = ""

    def sentence(self) -> str:
        """The triplet as the reader sees it: its surface form, as extracted (inflected verb, names as
        written); the lemma form where no surface form was kept."""
        return self.surface or self.lemma_sentence()

    def lemma_sentence(self) -> str:
        """The triplet's matching form: names and the lemmatised relation ("... be duet by ...")."""
        return f"{self.subject} {self.relation} {self.object}"

    def to_dict(self) -> dict[str, Any]:
        return {"subject": self.subject, "relation": self.relation, "object": self.object,
                "doc_id": self.doc_id, "section_id": self.section_id, "page": self.page,
                "source": self.source, "surface": self.surface}


def normalize(name: str) -> str:
    """Node identity of an entity name: lower-case, no determiner, single spaces."""
    name = _DETS.sub("", name.strip())
    name = re.sub(r"[\s]+", " ", name).strip(" .,;:'\"")
    if name.lower().endswith("'s"):
        name = name[:-2]
    return name.lower()


def clean(name: str) -> str:
    """Display form of an argument: no leading determiner, no possessive, no edge punctuation."""
    name = _DETS.sub("", re.sub(r"\s+", " ", name.strip())).strip(" .,;:'\"")
    return name[:-2] if name.endswith("'s") else name


def written(text: str) -> str:
    """An argument as the page wrote it (determiner and case kept; spaces and edge punctuation tidied)."""
    return re.sub(r"\s+", " ", text.strip()).strip(" .,;:\"")


@dataclass
class SpacyTriplets:
    """Dependency-based open IE over spaCy parses (see the module docstring)."""

    nlp: Any
    arguments: str  # entities | noun_chunks (any noun chunk may be an argument)
    name: str = "spacy-oie"
    _cache: dict[str, list[tuple[str, str, str]]] = field(default_factory=dict, repr=False)

    def _argument_ok(self, tok: Any) -> bool:
        if tok.ent_type_:
            return True
        if tok.pos_ == "PROPN":
            return True
        return self.arguments == "noun_chunks" and tok.pos_ in ("NOUN", "PROPN")

    def _resolve(self, tok: Any, pronoun_entity: str | None, verb: Any) -> Any | None:
        """The argument a subject token stands for (relative pronoun -> antecedent, it -> page)."""
        low = tok.text.lower()
        if low in RELATIVE and verb.dep_ == "relcl":
            return verb.head
        if low in PRONOUNS:
            return pronoun_entity
        return tok

    def _subjects(self, verb: Any) -> list[Any]:
        subs = [c for c in verb.children if c.dep_ in SUBJ_DEPS]
        if not subs and verb.dep_ == "conj" and verb.head.pos_ in ("VERB", "AUX"):
            return self._subjects(verb.head)
        if not subs and verb.dep_ in ("relcl", "acl"):
            return [verb.head]
        out = []
        for s in subs:
            out.append(s)
            out.extend(c for c in s.conjuncts)
        return out

    def _objects(self, verb: Any) -> list[tuple[str, str, Any]]:
        """(relation suffix, the suffix as written, object token) triples of a verb."""
        out: list[tuple[str, str, Any]] = []
        for c in verb.children:
            if c.dep_ in OBJ_DEPS:
                out.append(("", "", c))
                # "is the chief designer of Y": a common-noun object joins the relation
                head = "" if _flags(c) in "EP" else f" {clean(c.text).lower()}"
                head_w = "" if _flags(c) in "EP" else f" {written(c.text)}"
                for p in c.children:
                    if p.dep_ == "prep":
                        out.extend((f"{head} {p.text.lower()}", f"{head_w} {p.text}", o)
                                   for o in p.children if o.dep_ == "pobj")
            elif c.dep_ in ("prep", "agent"):
                for o in c.children:
                    if o.dep_ == "pobj":
                        out.append((f" {c.text.lower()}", f" {c.text}", o))
                    elif o.dep_ == "pcomp":  # "known as X"
                        out.extend((f" {c.text.lower()} {o.text.lower()}", f" {c.text} {o.text}", g)
                                   for g in o.children if g.dep_ in ("pobj", "dobj"))
            elif c.dep_ == "acomp":
                for p in c.children:
                    if p.dep_ == "prep":
                        out.extend((f" {c.text.lower()} {p.text.lower()}", f" {c.text} {p.text}", o)
                                   for o in p.children if o.dep_ == "pobj")
        expanded = []
        for rel, rel_w, o in out:
            expanded.append((rel, rel_w, o))
            expanded.extend((rel, rel_w, c) for c in o.conjuncts)
        return expanded

    def prefetch(self, texts: list[str], batch_size: int = 64) -> None:
        """Parse many texts in one spaCy pipe (several times faster than one by one)."""
        todo = list(dict.fromkeys(t for t in texts if t not in self._cache))
        for text, doc in zip(todo, self.nlp.pipe(todo, batch_size=batch_size)):
            self._cache[text] = self._triples(doc)

    def _parse(self, text: str) -> list[tuple[str, str, str, str]]:
        return self._triples(self.nlp(text))

    def _triples(self, doc: Any) -> list[tuple[str, str, str, str]]:
        """(subject key, lemma relation, object key, relation as written) per fact of a parse."""
        import spacy

        spans = spacy.util.filter_spans([_extend(s) for s in list(doc.ents) + list(doc.noun_chunks)])
        with doc.retokenize() as rt:
            for span in spans:
                if len(span) > 1:
                    rt.merge(span)
        found: list[tuple[str, str, str, str]] = []
        for verb in doc:
            if verb.pos_ not in ("VERB", "AUX"):
                continue
            objects = self._objects(verb)
            if not objects:
                continue
            lemma = verb.lemma_.lower()
            passive = any(c.dep_ in ("auxpass", "nsubjpass") for c in verb.children)
            verb_text = verb.text.lower() if passive else lemma
            if passive:
                aux = [c.text.lower() for c in verb.children if c.dep_ == "auxpass"]
                verb_text = " ".join(aux[:1] + [verb_text])
            negated = any(c.dep_ == "neg" for c in verb.children)
            if negated:
                continue  # a negated fact is not an edge
            # the verb as written, with its auxiliaries ("has released", "was born")
            aux_w = [c.text for c in verb.children if c.dep_ in ("aux", "auxpass") and c.i < verb.i]
            verb_w = " ".join(aux_w + [verb.text])
            for s in self._subjects(verb):
                s = _of_entity(s)  # "the office of X is at Y": X is the subject
                for suffix, suffix_w, o in objects:
                    found.append((self._token_key(s, verb), verb_text + suffix, self._token_key(o, None),
                                  verb_w + suffix_w))
        return found

    @staticmethod
    def _token_key(tok: Any, verb: Any) -> str:
        """Serialise a token for the cache: its text plus flags used at resolve time."""
        low = tok.text.lower()
        if verb is not None and low in RELATIVE and verb.dep_ == "relcl":
            return "\x00REL\x00" + verb.head.text + "\x00" + _flags(verb.head)
        if low in PRONOUNS:
            return "\x00PRON\x00"
        return tok.text + "\x00" + _flags(tok)

    def _arg(self, key: str, pronoun_entity: str | None, nouns_ok: bool, as_written: bool = False) -> str | None:
        if key == "\x00PRON\x00":
            return pronoun_entity
        if key.startswith("\x00REL\x00"):
            key = key[len("\x00REL\x00"):]
        text, flags = key.rsplit("\x00", 1)
        if flags == "E" or flags == "P" or (nouns_ok and flags == "N"):
            name = written(text) if as_written else clean(text)
            return name or None
        return None

    def extract_surface(self, text: str, pronoun_entity: str | None = None) -> list[tuple[str, str, str, str]]:
        """(subject, relation, object, surface) found in ``text`` (deduplicated, in order): names
        cleaned and the relation lemmatised for the graph's matching; ``surface`` the fact as the text
        wrote it (inflected verb with its auxiliaries, names with their determiners), for the reader."""
        if text not in self._cache:
            self._cache[text] = self._parse(text)
        nouns_ok = self.arguments == "noun_chunks"
        out, seen = [], set()
        for s_key, rel, o_key, rel_w in self._cache[text]:
            s = self._arg(s_key, pronoun_entity, nouns_ok)
            o = self._arg(o_key, pronoun_entity, nouns_ok)
            if not s or not o or normalize(s) == normalize(o):
                continue
            key = (normalize(s), rel, normalize(o))
            if key not in seen:
                seen.add(key)
                sw = self._arg(s_key, pronoun_entity, nouns_ok, as_written=True) or s
                ow = self._arg(o_key, pronoun_entity, nouns_ok, as_written=True) or o
                out.append((s, rel, o, f"{sw} {rel_w} {ow}"))
        return out

    def extract(self, text: str, pronoun_entity: str | None = None) -> list[tuple[str, str, str]]:
        """(subject, relation, object) names found in ``text`` (deduplicated, in order)."""
        return [(s, r, o) for s, r, o, _ in self.extract_surface(text, pronoun_entity)]

    def entities(self, text: str) -> list[str]:
        """Named entities and proper-noun chunks of a short text (captions, queries)."""
        import spacy

        doc = self.nlp(text)
        spans = spacy.util.filter_spans(list(doc.ents) + [
            c for c in doc.noun_chunks if c.root.pos_ == "PROPN"
            or (self.arguments == "noun_chunks" and c.root.pos_ == "NOUN")])
        names, seen = [], set()
        for span in spans:
            if span.root.text.lower() in PRONOUNS:
                continue
            name = clean(span.text)
            if name and normalize(name) not in seen:
                seen.add(normalize(name))
                names.append(name)
        return names


def _extend(span: Any) -> Any:
    """Grow an entity/noun-chunk span over trailing numbers and names ("Expo 2031", "Dovo 200")."""
    doc, end = span.doc, span.end
    while end < len(doc) and doc[end].pos_ in ("NUM", "PROPN") and span.start <= doc[end].head.i < end + 1:
        end += 1
    while end < len(doc) and doc[end].pos_ == "NUM" and doc[end].head.i in range(span.start, end):
        end += 1
    return doc[span.start:end] if end != span.end else span


def _of_entity(tok: Any) -> Any:
    """A common-noun subject with an "of <entity>" complement stands for that entity."""
    if _flags(tok) in "EP":
        return tok
    for p in tok.children:
        if p.dep_ == "prep" and p.text.lower() == "of":
            for o in p.children:
                if o.dep_ == "pobj" and _flags(o) in "EP":
                    return o
    return tok


def _flags(tok: Any) -> str:
    """E: named entity, P: proper noun, N: common noun, O: other."""
    if tok.ent_type_:
        return "E"
    if tok.pos_ == "PROPN":
        return "P"
    return "N" if tok.pos_ == "NOUN" else "O"


LLM_PROMPT = (
    "Extract the facts of the text as triplets. Subjects and objects must be named entities "
    "(people, products, organisations, places, events, dates). Write one triplet per line as\n"
    "subject | relation | object\nand nothing else.\n\nText: {text}\nTriplets:")


@dataclass
class LLMTriplets:
    """The paper's extractor: an LLM (models/llm.py ChatLLM) writes the triplets."""

    llm: Any
    max_new_tokens: int = 160
    name: str = "llm"
    nlp: Any = None  # for entities() of captions and queries; falls back to capitalised words
    _replies: dict[str, str] = field(default_factory=dict, repr=False)  # text -> the LLM's reply

    def prefetch(self, texts: list[str]) -> None:
        """Ask for every new text at once (greedy; the llama.cpp engine runs them concurrently);
        a graph build calls this with every section of the corpus first."""
        missing = [t for t in dict.fromkeys(texts) if t not in self._replies]
        if missing:
            convs = [[{"role": "user", "content": LLM_PROMPT.format(text=t)}] for t in missing]
            gens = self.llm.generate(convs, max_new_tokens=self.max_new_tokens, temperature=0.0)
            self._replies.update({t: g.text for t, g in zip(missing, gens)})

    def extract_many(self, texts: list[str], pronoun_entity: str | None = None
                     ) -> list[list[tuple[str, str, str]]]:
        """Batched extraction; unparseable lines are dropped (counted by the caller if needed)."""
        self.prefetch(texts)
        return [parse_triplet_lines(self._replies[t], pronoun_entity) for t in texts]

    def extract(self, text: str, pronoun_entity: str | None = None) -> list[tuple[str, str, str]]:
        return self.extract_many([text], pronoun_entity)[0]

    def extract_surface(self, text: str, pronoun_entity: str | None = None) -> list[tuple[str, str, str, str]]:
        """(subject, relation, object, surface): ``surface`` is the triplet as the LLM wrote it."""
        self.prefetch([text])
        return parse_triplet_lines(self._replies[text], pronoun_entity, surface=True)  # type: ignore[return-value]

    def entities(self, text: str) -> list[str]:
        if self.nlp is not None:
            # named entities only: the LLM extractor has no noun-chunk arguments
            return SpacyTriplets(self.nlp, arguments="entities").entities(text)
        return [clean(m) for m in re.findall(r"(?:[A-Z][\w-]*\s?)+", text) if clean(m)]


def parse_triplet_lines(text: str, pronoun_entity: str | None = None, surface: bool = False
                        ) -> list[tuple[str, ...]]:
    """``a | r | b`` lines -> triplets; pronoun subjects resolve to the page entity. ``surface``: a
    fourth element, the triplet as the LLM wrote it ("a r b", the relation's case kept)."""
    out: list[tuple[str, ...]] = []
    for line in text.splitlines():
        parts = [p.strip(" -*\t") for p in line.split("|")]
        if len(parts) != 3 or not all(parts):
            continue
        s, r, o = parts
        if s.lower() in PRONOUNS:
            if not pronoun_entity:
                continue
            s = pronoun_entity
        t = (clean(s), r.lower(), clean(o))
        out.append(t + (f"{written(s)} {r} {written(o)}",) if surface else t)
    return out


def sentences(text: str) -> list[str]:
    """Cheap sentence split, used only to bound extractor inputs."""
    return [s for s in re.split(r"(?<=[.!?])\s+", text.strip()) if s]


def extract_document(extractor: Any, doc: Any) -> list[Triplet]:
    """Triplets of every section of a schema.Document, with their provenance."""
    if hasattr(extractor, "prefetch"):
        extractor.prefetch([sec.text for sec in doc.sections])
    out: list[Triplet] = []
    for sec in doc.sections:
        if hasattr(extractor, "extract_surface"):
            facts = extractor.extract_surface(sec.text, pronoun_entity=doc.title)
        else:  # an extractor without surface forms: the reader gets the lemma form
            facts = [(s, r, o, "") for s, r, o in extractor.extract(sec.text, pronoun_entity=doc.title)]
        for s, r, o, surface in facts:
            out.append(Triplet(s, r, o, doc.id, sec.id, sec.page, "section", surface))
    return out


def unique(triplets: Iterable[Triplet]) -> list[Triplet]:
    """Drop exact repeats (same names, relation and provenance), keeping order."""
    seen, out = set(), []
    for t in triplets:
        if t not in seen:
            seen.add(t)
            out.append(t)
    return out


def make_extractor(kind: str, nlp: Any, arguments: str, llm: Any = None) -> SpacyTriplets | LLMTriplets:
    """The triplet extractor params ask for (``kind``: spacy | llm)."""
    if kind == "spacy":
        return SpacyTriplets(nlp, arguments=arguments)
    if llm is None:
        raise ValueError("extractor 'llm' needs an LLM (models/llm.py); none was given")
    return LLMTriplets(llm, nlp=nlp)
