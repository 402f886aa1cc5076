"""The ingestion report: every problem with the input is counted, never silently dropped.

Each problem kind says what was wrong and what ingestion did about it (skipped, kept,
renamed, downscaled). The stage writes the report to ``results/corpora/ingest_report.json``
and the notebook shows it as a table.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

# kind -> (what was wrong, what ingestion did)
PROBLEMS: dict[str, tuple[str, str]] = {
    "corrupt_image": ("image bytes cannot be decoded", "image skipped"),
    "missing_image": ("referenced image file not found", "image skipped"),
    "remote_image": ("image is a URL (needs the network)", "image skipped"),
    "unsupported_image": ("image format cannot be decoded here (e.g. SVG)", "image skipped"),
    "tiny_image": ("image smaller than min_image_side (icon, spacer, tracking pixel)",
                   "image skipped"),
    "huge_image": ("image above max_image_pixels (decompression-bomb guard)", "image skipped"),
    "downscaled_image": ("image side above max_image_side", "downscaled, kept"),
    "decorative_image": ("same image on more than max_image_repeats documents (site icon, logo)",
                         "dropped from every document"),
    "non_utf8_text": ("page is not valid UTF-8", "decoded with its declared charset or cp1252, kept"),
    "empty_section": ("heading with no text, image or table under it", "section dropped"),
    "empty_document": ("no text and no usable image", "document skipped"),
    "duplicate_id": ("two files map to the same document id", "renamed with a suffix, kept"),
    "duplicate_document": ("same title and text as an earlier document", "skipped"),
    "pdf_without_text": ("PDF pages with no extractable text (scanned?)",
                         "images kept; skipped if nothing else"),
    "corrupt_pdf": ("PDF cannot be parsed or is encrypted", "file skipped"),
    "corrupt_zim": ("ZIM archive cannot be opened", "file skipped"),
    "zim_limit": ("ZIM articles beyond max_zim_articles", "not ingested"),
    "unreadable_file": ("file cannot be read", "file skipped"),
    "unsupported_file": ("file type is not ingested", "file skipped"),
    "bad_question_line": ("question JSONL line is not a JSON object", "line skipped"),
    "invalid_question": ("question without text or answer", "question skipped"),
    "duplicate_question_id": ("question id repeats", "renamed with a suffix, kept"),
    "missing_question_image": ("question's image cannot be used", "question skipped"),
    "bad_questions_file": ("questions file is not HotpotQA/MuSiQue JSON or JSONL of the expected shape",
                           "file skipped"),
    "invalid_multihop_item": ("HotpotQA/MuSiQue item without an id or with malformed context/paragraphs",
                              "question skipped"),
    "unanswerable_question": ("MuSiQue item marked answerable: false", "question skipped"),
    "bad_supporting_fact": ("supporting fact names a paragraph or sentence its item lacks",
                            "fact dropped, question kept"),
    "conflicting_paragraph": ("same title with a different lead paragraph in another question",
                              "first text kept"),
}

MAX_EXAMPLES = 5


@dataclass
class IngestReport:
    """Counts of problems (with a few examples each) and of what was ingested."""

    problems: Counter = field(default_factory=Counter)
    examples: dict[str, list[str]] = field(default_factory=dict)
    files: Counter = field(default_factory=Counter)  # by type: html, markdown, pdf, zim, ...
    ingested: Counter = field(default_factory=Counter)  # documents, sections, images, ...

    def add(self, kind: str, where: str, detail: str = "", n: int = 1) -> None:
        """Count one problem of a known kind at `where` (a path relative to the folder)."""
        if kind not in PROBLEMS:
            raise KeyError(f"unknown ingestion problem '{kind}'")
        self.problems[kind] += n
        ex = self.examples.setdefault(kind, [])
        if len(ex) < MAX_EXAMPLES:
            ex.append(f"{where}: {detail}" if detail else where)

    def rows(self) -> list[dict[str, Any]]:
        """One row per problem kind seen: count, what, action, examples (for the table)."""
        return [{"problem": k, "count": self.problems[k], "what": PROBLEMS[k][0],
                 "action": PROBLEMS[k][1], "examples": "; ".join(self.examples.get(k, []))}
                for k in sorted(self.problems)]

    def summary(self, examples: int = 3) -> list[str]:
        """A few console lines: what was ingested, then each problem with its count and first files."""
        made = ", ".join(f"{v} {k}" for k, v in sorted(self.ingested.items())) or "nothing"
        read = ", ".join(f"{v} {k}" for k, v in sorted(self.files.items())) or "no files"
        lines = [f"ingested {made} from {read}"]
        if self.ingested["images"]:
            n, c = self.ingested["images"], self.ingested["captioned_images"]
            lines[0] += f"; caption coverage {c}/{n} images ({c / n:.0%})"
        for k in sorted(self.problems):
            what, action = PROBLEMS[k]
            shown = "; ".join(self.examples.get(k, [])[:examples])
            lines.append(f"  {self.problems[k]} x {k}: {what} -> {action}" + (f" (e.g. {shown})" if shown else ""))
        return lines

    def to_dict(self) -> dict[str, Any]:
        return {"files": dict(sorted(self.files.items())),
                "ingested": dict(sorted(self.ingested.items())),
                "problems": dict(sorted(self.problems.items())),
                "examples": {k: v for k, v in sorted(self.examples.items())},
                "legend": {k: {"what": w, "action": a} for k, (w, a) in PROBLEMS.items()
                           if k in self.problems}}
