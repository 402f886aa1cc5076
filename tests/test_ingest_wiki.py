"""Real Wikipedia HTML (Kiwix/MediaWiki shape): thumb and infobox captions, decorative icons,
caption coverage; and a text-only folder getting through the corpora stage."""

from __future__ import annotations

import json

from PIL import Image as PILImage
from test_ingest import tiny_options

from mmrag.corpora import ingest
from mmrag.corpora.report import PROBLEMS
from mmrag.schema import load_documents

ICON = "<a href='Wikimedia_Commons'><img src='I/commons.png' width='16' height='16'></a>"


def _kiwix_page(title: str, body: str) -> str:
    return (f"<html><head><title>{title}</title></head><body><h1>{title}</h1>{body}"
            f"<h2>External links</h2><p>{ICON} Media related to {title} on Commons.</p>"
            f"</body></html>")


def _wiki_folder(src):
    (src / "I").mkdir(parents=True)
    PILImage.new("RGB", (16, 16), "blue").save(src / "I" / "commons.png")
    for name, color in (("lion", "orange"), ("map", "green"), ("flag", "red"), ("coat", "gray")):
        PILImage.new("RGB", (120, 80), color).save(src / "I" / f"{name}.png")
    infobox = (
        "<table class='infobox biota'><tr><th colspan='2'>Lion</th></tr>"
        "<tr><td colspan='2'><a class='image'><img src='I/map.png' alt=''></a></td></tr>"
        "<tr><td colspan='2'>Range of the lion in Africa</td></tr>"
        "<tr><td colspan='2'><img src='I/flag.png'><br><span>Lion on a flag</span></td></tr>"
        "<tr><th>Kingdom</th><td>Animalia</td></tr></table>")
    thumb = ("<div class='thumb tright'><div class='thumbinner' style='width:222px;'>"
             "<a class='image'><img alt='' src='I/lion.png' class='thumbimage'></a>"
             "<div class='thumbcaption'><div class='magnify'><a title='Enlarge'></a></div>"
             "A male lion in Kenya</div></div></div>")
    pages = {"Lion": f"{infobox}<p>The lion is a large cat.</p>{thumb}<p>It lives in prides.</p>",
             "Tiger": "<p>The tiger is the largest cat.</p>",
             "Leopard": "<p>The leopard is spotted.</p>"
                        "<figure typeof='mw:File/Thumb'><a><img src='I/coat.png'></a>"
                        "<figcaption>A leopard resting</figcaption></figure>",
             "Cheetah": "<p>The cheetah is fast.</p>"}
    for title, body in pages.items():
        (src / f"{title}.html").write_text(_kiwix_page(title, body), encoding="utf-8")


def test_kiwix_captions_are_found_and_not_repeated_as_text():
    title, blocks = ingest.html_blocks(
        "<html><body><h1>Lion</h1><div class='thumb'><div class='thumbinner'><img src='a.png'>"
        "<div class='thumbcaption'>A lion</div></div></div><p>Text.</p></body></html>")
    assert title == "Lion"
    assert [(b.kind, b.figcaption or b.text) for b in blocks] == [("image", "A lion"), ("text", "Text.")]


def test_wikipedia_folder_captions_icons_and_coverage(tmp_path):
    src, out = tmp_path / "src", tmp_path / "out"
    _wiki_folder(src)
    docs, _, rep = ingest.ingest_folder(src, out, tiny_options())
    by_title = {d.title: d for d in docs}
    lion = by_title["Lion"]
    assert {i.caption for i in lion.images} == {"Range of the lion in Africa", "Lion on a flag",
                                                "A male lion in Kenya"}
    text = " ".join(s.text for s in lion.sections)
    for caption in ("Range of the lion", "Lion on a flag", "A male lion in Kenya"):
        assert caption not in text, caption
    assert "The lion is a large cat." in text and "It lives in prides." in text
    table_text = json.dumps([t.rows for t in lion.tables])
    assert "Animalia" in table_text and "Range of the lion" not in table_text
    assert by_title["Leopard"].images[0].caption == "A leopard resting"
    assert "A leopard resting" not in " ".join(s.text for s in by_title["Leopard"].sections)
    # the 16x16 Commons icon is on all 4 pages (> max_image_repeats = 3): dropped everywhere
    assert rep.problems["decorative_image"] == 4 and "decorative_image" in PROBLEMS
    assert all("commons" not in i.caption for d in docs for i in d.images)
    assert sum(len(d.images) for d in docs) == 4 == rep.ingested["images"]
    assert rep.ingested["captioned_images"] == 4
    assert "caption coverage 4/4 images (100%)" in rep.summary()[0]
    stored = {p.name for p in (out / "images").iterdir()}
    assert len(stored) == 4  # the icon's file is gone too
    assert [d.to_dict() for d in load_documents(out)] == [d.to_dict() for d in docs]
    # at a higher threshold the icon stays (uncaptioned), and coverage says so
    docs2, _, rep2 = ingest.ingest_folder(src, tmp_path / "o2", tiny_options(max_image_repeats=4))
    assert rep2.problems["decorative_image"] == 0 and rep2.ingested["images"] == 8
    assert "caption coverage 4/8 images (50%)" in rep2.summary()[0]


def test_text_only_folder_passes_the_corpora_stage(tmp_path):
    from mmrag.stages.corpora import check_usable, folder_images_figure

    src, out = tmp_path / "src", tmp_path / "out"
    (src / "questions").mkdir(parents=True)
    (src / "a.md").write_text("# Alpha\n\nAlpha is the first letter.\n", encoding="utf-8")
    (src / "b.md").write_text("# Beta\n\nBeta is the second letter.\n", encoding="utf-8")
    (src / "questions" / "q.jsonl").write_text(
        json.dumps({"question": "Which letter is first?", "answer": "Alpha"}) + "\n", encoding="utf-8")
    docs, questions, rep = ingest.ingest_folder(src, out, tiny_options())
    check_usable(docs, questions, src)
    assert len(docs) == 2 and len(questions["q"]) == 1 and not rep.problems
    assert rep.ingested["images"] == 0 and "caption coverage" not in rep.summary()[0]
    fig = folder_images_figure(docs, out)
    assert fig is not None
    assert "No image was ingested" in " ".join(t.get_text() for ax in fig.axes for t in ax.texts)
    fig.savefig(tmp_path / "folder_images.png")
    assert (tmp_path / "folder_images.png").stat().st_size > 0
