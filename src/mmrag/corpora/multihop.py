"""Official HotpotQA and MuSiQue files dropped in a folder's ``questions/`` -> documents + questions.

HotpotQA ships a JSON array (or JSONL) of ``{_id, question, answer, type, level, context,
supporting_facts}``; MuSiQue ships JSONL of ``{id, question, answer, answer_aliases, paragraphs,
question_decomposition, answerable}``. Both carry their own context paragraphs, so a file becomes
documents (one per Wikipedia title, its distinct paragraphs as sections, merged across questions
and files) and one question set named after the file stem, with the official ids, question types,
gold evidence (section ids) and, for MuSiQue, the gold decomposition kept.

Ids follow the folder corpus: a document is ``slug(title)`` (the id a folder page of that name
gets) and its sections are ``<doc_id>#s<n>`` in order of first appearance. A title whose id a
folder document already holds is merged into that document: a paragraph it already contains maps
to that section, any other paragraph is appended as a new section. Problems are counted in the
:class:`~mmrag.corpora.report.IngestReport`, never raised.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mmrag.corpora.layout import slug
from mmrag.corpora.report import IngestReport
from mmrag.schema import Document, Question, Section, SubQuestion

HOTPOTQA, MUSIQUE = "hotpotqa", "musique"
EXPECTED = ("a JSON array or JSONL of HotpotQA objects (_id, question, answer, context, supporting_facts) "
            "or MuSiQue JSONL objects (id, question, answer, paragraphs, question_decomposition)")
_SECTION_NO = re.compile(r"#s(\d+)$")
_REF = re.compile(r"#(\d+)")
_HOPS = re.compile(r"^(\d+)hop")


def detect_format(row: Any) -> str | None:
    """Which official format one parsed item is in (None: neither), from its distinctive keys."""
    if not isinstance(row, dict) or "question" not in row:
        return None
    if "_id" in row and "context" in row:
        return HOTPOTQA
    if "id" in row and "paragraphs" in row:
        return MUSIQUE
    return None


def is_multihop_file(path: Path, rel: Path) -> bool:
    """Any ``questions/*.json`` (malformed ones too, to be reported) or a JSONL whose first object is official."""
    ext = path.suffix.lower()
    if ext == ".json":
        return rel.parent.name == "questions"
    if ext != ".jsonl":
        return False
    try:
        with path.open(encoding="utf-8-sig", errors="replace") as fh:
            for line in fh:
                if line.strip():
                    return detect_format(json.loads(line)) is not None
    except (OSError, ValueError):
        return False  # the plain reader reports it
    return False


def _norm(text: str) -> str:
    return " ".join(text.split())


def _join_sentences(sentences: list[str]) -> str:
    """HotpotQA sentences carry their own leading spaces; add one only where a sentence lacks it."""
    out = ""
    for s in sentences:
        out += s if not out or s[:1].isspace() else f" {s}"
    return out.strip()


@dataclass
class DocumentPool:
    """The corpus's documents by id, to which paragraphs are added once (dedup by id and text)."""

    report: IngestReport
    docs: dict[str, Document] = field(default_factory=dict)
    by_title: dict[str, str] = field(default_factory=dict)  # multihop title -> doc id
    folder_ids: set[str] = field(default_factory=set)  # documents the folder's own files made
    lead: dict[str, str] = field(default_factory=dict)  # doc id -> its HotpotQA lead section id
    new_docs: list[Document] = field(default_factory=list)

    @classmethod
    def of(cls, documents: list[Document], report: IngestReport) -> DocumentPool:
        """A pool seeded with the folder's own documents, so dataset titles dedupe against them."""
        return cls(report=report, docs={d.id: d for d in documents}, folder_ids={d.id for d in documents})

    def _doc_for(self, title: str, where: str, dataset: str) -> Document:
        """The document a title maps to: an existing one with that title or id, else a new one."""
        if title in self.by_title:
            doc = self.docs[self.by_title[title]]
            if where not in doc.meta.setdefault("paths", []):
                doc.meta["paths"].append(where)
            return doc
        base = slug(title)
        doc_id, k = base, 2
        while doc_id in self.docs and doc_id not in self.folder_ids:  # another title, same slug
            doc_id, k = f"{base}_{k}", k + 1
        if doc_id in self.docs:  # a folder document of that id: merge into it
            doc = self.docs[doc_id]
        else:
            doc = Document(id=doc_id, title=title, source=dataset,
                           meta={"path": where, "paths": [where], "dataset": dataset})
            self.docs[doc_id] = doc
            self.new_docs.append(doc)
        self.by_title[title] = doc_id
        return doc

    def section(self, title: str, text: str, where: str, dataset: str, lead: bool) -> str | None:
        """The paragraph's section id, added once; ``lead`` (HotpotQA): another text is a conflict."""
        norm = _norm(text)
        if not norm:
            return None
        doc = self._doc_for(title, where, dataset)
        folder = doc.id in self.folder_ids
        for s in doc.sections:
            have = _norm(s.text)
            if have == norm or (folder and norm in have):
                return s.id
        if lead and doc.id in self.lead:
            self.report.add("conflicting_paragraph", where, title[:80])
            return self.lead[doc.id]
        nums = [int(m.group(1)) for s in doc.sections if (m := _SECTION_NO.search(s.id))]
        sec = Section(id=f"{doc.id}#s{max(nums) + 1 if nums else 0}", doc_id=doc.id, title=title,
                      text=text.strip(), page=None if folder else 1)
        doc.sections.append(sec)
        if lead:
            self.lead[doc.id] = sec.id
        return sec.id


# --------------------------------------------------------------------------- HotpotQA
def hotpot_question(row: dict[str, Any], pool: DocumentPool, where: str) -> Question | None:
    """One HotpotQA item -> Question (official id, type as kind, supporting sections as gold)."""
    qid, text, answer = str(row.get("_id") or ""), str(row.get("question") or "").strip(), row.get("answer")
    context = row.get("context")
    if not qid or not isinstance(context, list) or not all(
            isinstance(c, list) and len(c) == 2 and isinstance(c[1], list) for c in context):
        pool.report.add("invalid_multihop_item", where, f"{qid or '(no _id)'}: context is not [[title, [sentences]]]")
        return None
    if not text or answer is None or str(answer).strip() == "":
        pool.report.add("invalid_question", where, qid)
        return None
    paragraphs: dict[str, tuple[list[str], str | None]] = {}
    for title, sentences in context:
        sentences = [str(s) for s in sentences]
        sid = pool.section(str(title), _join_sentences(sentences), where, HOTPOTQA, lead=True)
        paragraphs.setdefault(str(title), (sentences, sid))
    gold: list[str] = []
    support: list[dict[str, Any]] = []
    for fact in row.get("supporting_facts") or []:
        ok = isinstance(fact, list) and len(fact) == 2 and isinstance(fact[1], int)
        title = str(fact[0]) if ok else ""
        sentences, sid = paragraphs.get(title, ([], None))
        if not ok or sid is None or not 0 <= fact[1] < len(sentences):
            pool.report.add("bad_supporting_fact", where, f"{qid}: {str(fact)[:60]}")
            continue
        support.append({"title": title, "sent_idx": fact[1], "section_id": sid,
                        "sentence": sentences[fact[1]].strip()})
        if sid not in gold:
            gold.append(sid)
    meta = {"source_file": where, "level": row.get("level"), "supporting_facts": support}
    meta.update({k: v for k, v in row.items() if k not in
                 {"_id", "question", "answer", "type", "level", "context", "supporting_facts"}})
    return Question(id=qid, text=text, answer=str(answer), dataset=HOTPOTQA, kind=str(row.get("type") or ""),
                    gold_evidence=gold, meta=meta)


# --------------------------------------------------------------------------- MuSiQue
def substitute(text: str, answers: list[str]) -> str:
    """``#k`` (a reference to the k-th earlier sub-answer) -> that answer; unknown refs stay."""
    return _REF.sub(lambda m: answers[int(m.group(1)) - 1] if 0 < int(m.group(1)) <= len(answers)
                    else m.group(0), text)


def musique_question(row: dict[str, Any], pool: DocumentPool, where: str) -> Question | None:
    """One MuSiQue item -> Question (official id, hop count as kind, substituted decomposition)."""
    qid, text, answer = str(row.get("id") or ""), str(row.get("question") or "").strip(), row.get("answer")
    paras = row.get("paragraphs")
    steps = row.get("question_decomposition") or []
    if not qid or not isinstance(paras, list) or not all(isinstance(p, dict) for p in paras) \
            or not isinstance(steps, list) or not all(isinstance(s, dict) for s in steps):
        pool.report.add("invalid_multihop_item", where,
                        f"{qid or '(no id)'}: paragraphs/question_decomposition are not lists of objects")
        return None
    if row.get("answerable") is False:
        pool.report.add("unanswerable_question", where, qid)
        return None
    if not text or answer is None or str(answer).strip() == "":
        pool.report.add("invalid_question", where, qid)
        return None
    by_idx: dict[int, str] = {}
    gold: list[str] = []
    for pos, p in enumerate(paras):
        sid = pool.section(str(p.get("title") or ""), str(p.get("paragraph_text") or ""), where, MUSIQUE,
                           lead=False)
        if sid is None:
            continue
        idx = p.get("idx", pos)
        by_idx[idx if isinstance(idx, int) else pos] = sid
        if p.get("is_supporting") and sid not in gold:
            gold.append(sid)
    decomposition: list[SubQuestion] = []
    raw_steps: list[dict[str, Any]] = []
    answers: list[str] = []
    for step in steps:
        raw = str(step.get("question") or "")
        sid = by_idx.get(step["paragraph_support_idx"]) if isinstance(step.get("paragraph_support_idx"), int) \
            else None
        decomposition.append(SubQuestion(text=substitute(raw, answers), tool="TextQA",
                                         answer=str(step.get("answer") or ""), evidence_ids=[sid] if sid else []))
        raw_steps.append({"id": step.get("id"), "question": raw,
                          "paragraph_support_idx": step.get("paragraph_support_idx")})
        answers.append(str(step.get("answer") or ""))
    m = _HOPS.match(qid)
    hops = int(m.group(1)) if m else len(steps)
    aliases = [str(a) for a in row.get("answer_aliases") or [] if str(a).strip()]
    meta = {"source_file": where, "id_shape": qid.split("__", 1)[0] if "__" in qid else "",
            "raw_decomposition": raw_steps}
    meta.update({k: v for k, v in row.items() if k not in
                 {"id", "question", "answer", "answer_aliases", "paragraphs", "question_decomposition",
                  "answerable"}})
    return Question(id=qid, text=text, answer=str(answer), dataset=MUSIQUE, kind=f"{hops}hop" if hops else "",
                    answer_aliases=aliases, gold_evidence=gold, decomposition=decomposition, meta=meta)


# --------------------------------------------------------------------------- files
def _items(path: Path, where: str, report: IngestReport) -> list[Any] | None:
    """The file's items (a JSON array, or JSONL objects); None, counted, if it has neither shape."""
    try:
        data = path.read_bytes()
    except OSError as e:
        report.add("unreadable_file", where, type(e).__name__)
        return None
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        report.add("non_utf8_text", where)
        text = data.decode("utf-8-sig", errors="replace")
    if path.suffix.lower() == ".json":
        try:
            items = json.loads(text)
        except ValueError as e:
            report.add("bad_questions_file", where, f"not JSON ({str(e)[:60]}); expected {EXPECTED}")
            return None
        if not isinstance(items, list):
            report.add("bad_questions_file", where, f"a JSON {type(items).__name__}, expected {EXPECTED}")
            return None
        return items
    items = []
    for n, line in enumerate(text.splitlines(), 1):
        if line.strip():
            try:
                items.append(json.loads(line))
            except ValueError as e:
                report.add("bad_question_line", f"{where}:{n}", str(e)[:60])
    return items


def read_file(path: Path, root: Path, pool: DocumentPool) -> list[Question] | None:
    """One official file -> its questions (documents go into the pool); None if the file is skipped."""
    where = str(path.relative_to(root))
    items = _items(path, where, pool.report)
    if items is None:
        return None
    fmt = next((f for f in map(detect_format, items[:1]) if f), None)
    if fmt is None:
        first = items[0] if items else None
        got = f"keys {sorted(first)[:8]}" if isinstance(first, dict) else (
            "an empty array" if not items else f"a {type(first).__name__}")
        pool.report.add("bad_questions_file", where, f"first item has {got}; expected {EXPECTED}")
        return None
    parse = hotpot_question if fmt == HOTPOTQA else musique_question
    out: list[Question] = []
    for item in items:
        if not isinstance(item, dict):
            pool.report.add("invalid_multihop_item", where, f"a {type(item).__name__}, not an object")
            continue
        q = parse(item, pool, where)
        if q is not None:
            out.append(q)
    return out


def ingest_files(paths: list[Path], root: Path, documents: list[Document],
                 questions: dict[str, list[Question]], report: IngestReport) -> None:
    """Every routed file after the folder's own pages, so titles dedupe against them; sets named by stem."""
    pool = DocumentPool.of(documents, report)
    for path in paths:
        qs = read_file(path, root, pool)
        if qs is not None:
            questions.setdefault(slug(path.stem), []).extend(qs)
    documents.extend(pool.new_docs)
