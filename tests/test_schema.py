"""schema.py: records round-trip through dicts, nested lists included; unknown fields are refused."""

from __future__ import annotations

import pytest

from mmrag.schema import Document, Evidence, Image, Question, Section, Step, SubQuestion, Trace


def test_document_roundtrip_with_nested_parts():
    doc = Document(id="d1", title="Vantor X2",
                   sections=[Section(id="d1#s0", doc_id="d1", title="Intro", text="Hi.")],
                   images=[Image(id="d1#i0", doc_id="d1", path="images/a.png",
                                 attributes={"colour": "red"})])
    back = Document.from_dict(doc.to_dict())
    assert back == doc and isinstance(back.sections[0], Section)


def test_question_and_trace_roundtrip():
    q = Question(id="q1", text="Who?", answer="Ada", dataset="mmqa",
                 decomposition=[SubQuestion(text="Who designed it?", tool="TextQA", answer="Ada")])
    assert Question.from_dict(q.to_dict()) == q
    t = Trace(question_id="q1", system="dnc", answer="Ada",
              steps=[Step(action="tool", target="TextQA", query="Who designed it?",
                          evidence=[Evidence(id="p1", kind="passage", content="Ada did.")])])
    back = Trace.from_dict(t.to_dict())
    assert back == t and back.evidence()[0].id == "p1"


def test_unknown_field_is_refused():
    with pytest.raises(ValueError, match="unknown fields"):
        Question.from_dict({"id": "q", "text": "t", "answer": "a", "dataset": "x", "colour": 1})


def test_a_missing_question_set_names_the_key_the_sets_and_the_fix(tmp_path):
    import pytest

    from mmrag.io import write_jsonl
    from mmrag.schema import Question, load_question_set, question_path

    corpus = tmp_path / "world"
    q = Question(id="q1", text="Who?", answer="A", dataset="mmqa")
    write_jsonl(question_path(corpus, "mmqa"), [q.to_dict()])
    assert load_question_set(corpus, "mmqa", "toolagent_eval.question_set") == [q]
    with pytest.raises(FileNotFoundError, match=r"toolagent_eval\.question_set = 'hotpot'.*\['mmqa'\].*set "
                                                r"toolagent_eval\.question_set to one of those"):
        load_question_set(corpus, "hotpot", "toolagent_eval.question_set")
