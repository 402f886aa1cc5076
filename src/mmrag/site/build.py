"""Build the static site from a results folder (and the data folder and sources beside it).

The repository a results folder belongs to is its parent: ``<repo>/results`` (the workspace, or a
smoke copy under ``build/smoke``). Everything the site shows is read from there at build time;
nothing is typed by hand. Layout of the output folder::

    index.html              the paper: systems, claims, cross-system comparison, cost, stages
    explorer.html           the trace explorer (data/traces-<set>.js, loaded on demand)
    stages/<stage>.html     one executed notebook per stage, in pipeline order
    source/<NN_stage>.ipynb the notebook source; source/<stage>.py.html the stage module
    metrics/<stage>.json    the stage's metrics.json, as the pipeline wrote it
    notes/<topic>.md|.html  the lab notes (benchmarks and what they show), from benchmarks/notes/
    figures/<hash>.<ext>    every image, stored once by content
    assets/                 CSS and the explorer's script
"""

from __future__ import annotations

import io as _io
import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import mistune
import yaml

from mmrag.io import atomic_dir, read_json
from mmrag.site import notebook, traces

TEMPLATES = Path(__file__).parent / "templates"
SYSTEM_STAGES = {"BRIT": ("brit_graph", "brit_linking"),
                 "DnC": ("toolagent_data", "toolagent_finetune", "toolagent_eval"),
                 "MM-R2": ("knowledge_map", "mmr2_traj", "mmr2_train"),
                 "shared (models, data, CLIP, evaluation, report)":
                     ("models", "world", "wiki", "clip", "folder_manifest", "corpora", "two_axis_eval", "report")}
SITE_STAGE = "site"  # the stage that builds this site is not a page of it
CROSS_COLUMNS = ("n", "accuracy", "f1", "recall@5", "route_recall@1", "tokens_per_q", "tool_calls_per_q")
# figures a reader looks for first, shown on the index when the stage made them: (stage, file, caption)
KEY_FIGURES = (("brit_linking", "example_subgraph.png", "BRIT: one question's retrieved subgraph (PCST nodes "
                "blue, nodes reached through image→text links orange, retrieved images as thumbnails)"),
               ("knowledge_map", "map.png", "MM-R2's KnowledgeMap: passages in 2-D, coloured by unit"),
               ("mmr2_train", "curves.png", "MM-R2 training: SFT loss, GRPO reward and its parts"),
               ("mmr2_train", "reward_variance.png", "GRPO: mean reward and its within-group variance per step"),
               ("toolagent_finetune", "loss.png", "DnC: fine-tuning loss of each LLM"))
FOREST_WORDS = ("forest", "claims")
# where each paper's claims are tested: the stage whose notebook has the paper's tables
PAPER_STAGES = {"BRIT": "brit_linking", "DnC": "toolagent_eval", "MM-R2": "two_axis_eval"}
_HEADING = re.compile(r'<h[1-4][^>]*\sid="([^"]+)"')


# --------------------------------------------------------------------------- the output
@dataclass
class Site:
    """Files of the site, by relative path; images are stored once by content."""

    files: dict[str, bytes] = field(default_factory=dict)

    def add(self, rel: str, data: bytes | str) -> str:
        self.files[rel] = data.encode() if isinstance(data, str) else data
        return rel

    def store(self, data: bytes, ext: str) -> str:
        data, ext = notebook.compact(data, ext)
        return self.add(notebook.figure_name(data, ext), data)

    def write(self, out: Path) -> None:
        """Replace ``out`` as a whole (stale pages and figures disappear)."""
        with atomic_dir(out) as tmp:
            for rel, data in sorted(self.files.items()):
                (tmp / rel).parent.mkdir(parents=True, exist_ok=True)
                (tmp / rel).write_bytes(data)


# --------------------------------------------------------------------------- what was run
@dataclass
class Stage:
    name: str
    number: str  # NN of notebooks/NN_<stage>.ipynb
    source: Path | None  # the notebook source
    module: Path
    executed: Path | None  # results/<stage>/<stage>.ipynb
    metrics: Path | None
    run: dict[str, Any] = field(default_factory=dict)  # executed, profile, duration


def stamp(root: Path, stages: Sequence[Stage]) -> dict[str, str]:
    """Which run the site shows: its profile and when its notebooks were executed (each notebook
    records both). Nothing from git: the same results give the same site on any clone, and the
    site stage's dvc.lock entry names the run."""
    profiles = sorted({s.run["profile"] for s in stages if s.executed})
    profile = " + ".join(profiles) if profiles else "none (no stage rendered yet)"
    times = sorted(s.run["executed"] for s in stages if s.executed and s.run.get("executed"))
    days = sorted({t[:10] for t in times})
    span = f"{days[0]} to {days[-1]}" if len(days) > 1 else (days[0] if days else "no rendered stage")
    return {"profile": profile, "span": span, "text": f"the {profile}-profile run of {span}"}


def run_info(executed: Path) -> dict[str, Any]:
    """When and on which profile papermill executed a notebook (from the notebook's metadata)."""
    meta = json.loads(executed.read_text(encoding="utf-8")).get("metadata", {}).get("papermill", {})
    end = meta.get("end_time")
    when = datetime.fromisoformat(end).strftime("%Y-%m-%d %H:%M UTC") if end else None
    secs = meta.get("duration")
    duration = None if secs is None else (f"{secs:.0f} s" if secs < 120 else f"{secs / 60:.1f} min")
    profile = (meta.get("parameters", {}).get("base") or {}).get("profile", "unrecorded")
    return {"executed": when, "duration": duration, "profile": profile}


def pipeline(root: Path, results: Path) -> list[Stage]:
    """Every stage of dvc.yaml, in its order, with what the results folder has of it."""
    names = [n for n in yaml.safe_load((root / "dvc.yaml").read_text())["stages"] if n != SITE_STAGE]
    out = []
    for name in names:
        found = sorted((root / "notebooks").glob(f"[0-9][0-9]_{name}.ipynb"))
        executed = results / name / f"{name}.ipynb"
        metrics = results / name / "metrics.json"
        st = Stage(name, found[0].name[:2] if found else "", found[0] if found else None,
                   root / "src" / "mmrag" / "stages" / f"{name}.py",
                   executed if executed.exists() else None, metrics if metrics.exists() else None)
        if st.executed:
            st.run = run_info(st.executed)
        out.append(st)
    return out


# --------------------------------------------------------------------------- numbers
def fmt(value: Any) -> str:
    """A number as the index shows it (3 decimals; 1 from 100 up; two significant digits below
    0.01; '–' for none)."""
    if value is None:
        return "–"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if value != value:
            return "nan"
        if abs(value) >= 100:
            return f"{value:.1f}"
        digits = 3 if value == 0 or abs(value) >= 0.01 else 1 - math.floor(math.log10(abs(value)))
        return f"{value:.{digits}f}".rstrip("0").rstrip(".")
    return str(value)


def num(value: Any, file: str, key: Sequence[Any]) -> Any:
    """A number tagged with the file and key it came from (tests/test_site.py checks each)."""
    from markupsafe import Markup, escape

    if isinstance(value, bool) or not isinstance(value, (int, float, type(None))):
        return escape(fmt(value))
    return Markup(f'<span class="num" data-file="{escape(file)}" data-key="{escape(json.dumps(list(key)))}">'
                  f'{escape(fmt(value))}</span>')


def total(parts: Sequence[tuple[str, Sequence[Any], float]]) -> Any:
    """A sum of tagged numbers, tagged with every part."""
    from markupsafe import Markup, escape

    tags = [[f, list(k)] for f, k, _ in parts]
    value = sum(v for _, _, v in parts)
    return Markup(f'<span class="num" data-sum="{escape(json.dumps(tags))}">{escape(fmt(round(value, 1)))}</span>')


# --------------------------------------------------------------------------- the index's content
def read_claims(results: Path) -> tuple[list[tuple[list[Any], dict[str, Any]]], str | None]:
    """([(key path, claim record)], why none) from results/report/claims.json."""
    f = results / "report" / "claims.json"
    if not f.exists():
        return [], ("results/report/claims.json does not exist yet: the report stage has not written "
                    "its claims (rerun `dvc repro report`).")
    raw = read_json(f)
    if isinstance(raw, dict) and isinstance(raw.get("claims"), list):
        return [(["claims", i], c) for i, c in enumerate(raw["claims"])], None
    if isinstance(raw, list):
        return [([i], c) for i, c in enumerate(raw)], None
    if isinstance(raw, dict):
        return [([k], c) for k, c in raw.items() if isinstance(c, dict)], None
    return [], "results/report/claims.json has a shape the site does not know (a list of claims expected)."


def is_main(system: str) -> bool:
    """The systems the cost chart keeps: each paper's full system and the flat baseline."""
    return ("brit__ca_ls_si" in system or system.startswith("mmr2") or system.startswith("baseline:")
            or ("dnc__" in system and system.endswith("__ft")))


def cross_rows(results: Path) -> list[tuple[int, dict[str, Any]]]:
    f = results / "two_axis_eval" / "metrics.json"
    if not f.exists():
        return []
    return list(enumerate(read_json(f).get("cross_system", [])))


def cost_rows(root: Path, results: Path) -> list[dict[str, Any]]:
    """Per (question set, main system): tokens and tool calls per question (the evaluator's
    metrics) and seconds per question (two_axis_eval's timings, kept out of the metrics)."""
    timing_file = root / "data" / "two_axis_eval" / "cost.json"
    secs = read_json(timing_file).get("seconds_per_q", {}) if timing_file.exists() else {}
    rows = []
    for i, r in cross_rows(results):
        if not is_main(r["system"]):
            continue
        key = f"{r['system']}__{r['question_set']}"
        rows.append({"i": i, "system": r["system"], "set": r["question_set"], "tokens": r.get("tokens_per_q"),
                     "calls": r.get("tool_calls_per_q"), "seconds_key": key, "seconds": secs.get(key)})
    return rows


def stage_seconds(results: Path) -> list[dict[str, Any]]:
    """Pipeline wall time per system, from each stage's results/<stage>/cost.json."""
    out = []
    for system, stages in SYSTEM_STAGES.items():
        parts = [(f"results/{s}/cost.json", ["wall_seconds"], read_json(results / s / "cost.json")["wall_seconds"])
                 for s in stages if (results / s / "cost.json").exists()]
        missing = [s for s in stages if not (results / s / "cost.json").exists()]
        out.append({"system": system, "parts": parts, "stages": stages, "missing": missing})
    return out


def colour(system: str) -> str:
    """One colour per paper (the flat baseline grey)."""
    for word, c in (("brit", "#4c72b0"), ("toolagent", "#dd8452"), ("mmr2", "#55a868")):
        if word in system:
            return c
    return "#8c8c8c"


def cost_chart(rows: Sequence[dict[str, Any]], walls: Sequence[dict[str, Any]], site: Site) -> str | None:
    """Bar charts: tokens and seconds per question per system and set; pipeline minutes per system."""
    if not rows and not any(w["parts"] for w in walls):
        return None
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    fig = Figure(figsize=(13, 0.35 * max(len(rows), 4) + 1.6), layout="constrained")
    axes = fig.subplots(1, 3)
    labels = [f"{r['system']} · {r['set']}" for r in rows]
    colours = [colour(r["system"]) for r in rows]
    panels = ((axes[0], "tokens", "LLM tokens per question"), (axes[1], "seconds", "seconds per question"))
    for ax, key, title in panels:
        vals = [r[key] or 0 for r in rows]
        ax.barh(range(len(rows)), vals, color=colours)
        ax.set_yticks(range(len(rows)), labels if ax is axes[0] else [""] * len(rows), fontsize=7)
        ax.invert_yaxis()
        ax.set_title(title, fontsize=10)
    mins = [sum(v for _, _, v in w["parts"]) / 60 for w in walls]
    axes[2].barh(range(len(walls)), mins, color=["#4c72b0", "#dd8452", "#55a868", "#8c8c8c"][: len(walls)])
    axes[2].set_yticks(range(len(walls)), [w["system"].split(" (")[0] for w in walls], fontsize=8)
    axes[2].invert_yaxis()
    axes[2].set_title("pipeline minutes (stage wall time)", fontsize=10)
    buf = _io.BytesIO()
    fig.savefig(buf, format="png", dpi=90, metadata={"Software": None})
    return site.store(buf.getvalue(), "png")


def result_figure(results: Path, stage: str, name: str, site: Site) -> str | None:
    f = results / stage / name
    return site.store(f.read_bytes(), f.suffix.lstrip(".")) if f.exists() else None


def forest_figures(results: Path, site: Site) -> list[str]:
    """The report stage's claims figures (a forest plot), when it made them."""
    return [site.store(f.read_bytes(), "png") for f in sorted((results / "report").glob("*.png"))
            if any(w in f.stem for w in FOREST_WORDS)]


# --------------------------------------------------------------------------- pages
def environment() -> Any:
    import jinja2

    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(TEMPLATES)), autoescape=True,
                             undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    env.globals.update(num=num, fmt=fmt, total=total)
    return env


def page_link(paged: set[str]) -> Any:
    """A stage's name, linked to its page when the site has one."""
    from markupsafe import Markup, escape

    def page(stage: str) -> Any:
        name = Markup(f"<code>{escape(stage)}</code>")
        return Markup(f'<a href="stages/{escape(stage)}.html">{name}</a>') if stage in paged else name
    return page


def section_link(headings: Mapping[str, list[str]]) -> Any:
    """The section of a paper's stage page that holds a claim's table (its first heading naming
    the table, e.g. "Table 2 — ..."), else the page, else the stage's name."""
    from urllib.parse import quote

    from markupsafe import Markup, escape

    def section(paper: str, table: str) -> Any:
        stage = PAPER_STAGES.get(paper, "report")
        if stage not in headings:
            return Markup(f"<code>{escape(stage)}</code>")
        words = [w for w in re.split(r"\W+", table or "") if w]
        want = "-".join(words)
        found = next((h for h in headings[stage] if want and quote(want) in h), None)
        href = f"stages/{stage}.html" + (f"#{found}" if found else "")
        where = Markup(" § ") + escape(table) if found else ""
        return Markup(f'<a href="{escape(href)}"><code>{escape(stage)}</code>{where}</a>')
    return section


def module_page(env: Any, st: Stage, root: Path) -> str:
    """The stage module, highlighted, every line an anchor (source/<stage>.py.html#L12)."""
    from pygments import highlight
    from pygments.formatters import HtmlFormatter
    from pygments.lexers import PythonLexer

    fmt_ = HtmlFormatter(linenos="table", lineanchors="L", anchorlinenos=True, cssclass="source")
    code = highlight(st.module.read_text(encoding="utf-8"), PythonLexer(), fmt_)
    return env.get_template("module.html.j2").render(
        stage=st.name, rel=str(st.module.relative_to(root)), code=code, css=fmt_.get_style_defs(".source"))


def stage_context(st: Stage, stages: Sequence[Stage], root: Path) -> dict[str, Any]:
    paged = [s.name for s in stages if s.executed]
    i = paged.index(st.name)
    return {"stage": st.name, "number": st.number,
            "prev": paged[i - 1] if i else None, "next": paged[i + 1] if i + 1 < len(paged) else None,
            "notebook_href": f"../source/{st.source.name}" if st.source else "#",
            "notebook_rel": str(st.source.relative_to(root)) if st.source else "(none)",
            "module_href": f"../source/{st.name}.py.html", "module_rel": str(st.module.relative_to(root)),
            "metrics_href": f"../metrics/{st.name}.json" if st.metrics else None,
            "metrics_rel": f"results/{st.name}/metrics.json", **st.run}


def explorer_page(env: Any, data: Mapping[str, dict[str, Any]], site: Site) -> str:
    sets = []
    for qset, payload in data.items():
        script = f"data/traces-{re.sub(r'[^A-Za-z0-9_.-]', '_', qset)}.js"
        body = json.dumps(payload, ensure_ascii=False, sort_keys=True).replace("</", "<\\/")
        site.add(script, "window.MMRAG_TRACES = window.MMRAG_TRACES || {};\n"
                         f"window.MMRAG_TRACES[{json.dumps(qset)}] = {body};\n")
        sets.append({"name": qset, "script": script, "source": payload["source"], "systems": payload["systems"],
                     "questions": [{"id": q["id"], "text": q["text"]} for q in payload["questions"]]})
    index = json.dumps(sets, ensure_ascii=False, sort_keys=True).replace("</", "<\\/")
    return env.get_template("explorer.html.j2").render(sets=sets, index_json=index)


def readme_block(stamp_: Mapping[str, str]) -> str:
    """The README's site line: the profile, not the commit (its index says which run it shows)."""
    return (f"**Read the papers without running anything:** [the rendered notebooks as a site](docs/index.html) "
            f"(`docs/`, the pipeline's last stage, from a {stamp_['profile']}-profile run; its index names the run).")


def lab_notes(notes: Path, env: Any) -> dict[str, tuple[str, bytes, str]]:
    """The hand-written lab notes (``benchmarks/notes/*.md``): name -> (title, markdown, rendered page)."""
    pages = {}
    for path in sorted(notes.glob("*.md")):
        text = path.read_text(encoding="utf-8")
        title = next((ln.lstrip("# ").strip() for ln in text.splitlines() if ln.startswith("# ")), path.stem)
        body = mistune.html(text.replace(".md)", ".html)"))
        pages[path.stem] = (title, text.encode("utf-8"),
                            env.get_template("note.html.j2").render(title=title, body=body))
    return pages


def update_readme(root: Path, stamp_: Mapping[str, str]) -> bool:
    """Rewrite README's ``<!-- site:start -->`` block; False when the README has none."""
    readme = root / "README.md"
    text = readme.read_text(encoding="utf-8")
    new, n = re.subn(r"(<!-- site:start -->\n).*?(\n<!-- site:end -->)",
                     lambda m: m.group(1) + readme_block(stamp_) + m.group(2), text, flags=re.S)
    if n and new != text:
        readme.write_text(new, encoding="utf-8")
    return bool(n)


def build(results: Path, out: Path, root: Path | None = None,
          max_questions: int = traces.MAX_QUESTIONS) -> dict[str, Any]:
    """Build the site from ``results`` into ``out``; ``root`` is the repository whose dvc.yaml,
    notebooks, stage modules and data/ go with them (default: the results folder's parent)."""
    results = results.resolve()
    root = (root or results.parent).resolve()
    site, env = Site(), environment()
    stages = pipeline(root, results)
    stamp_ = stamp(root, stages)
    css: list[str] = []
    headings: dict[str, list[str]] = {}
    for st in stages:
        if st.source:
            site.add(f"source/{st.source.name}", st.source.read_bytes())
        if st.module.exists():
            site.add(f"source/{st.name}.py.html", module_page(env, st, root))
        if st.metrics:
            site.add(f"metrics/{st.name}.json", st.metrics.read_bytes())
        if st.executed:
            context = stage_context(st, stages, root)
            html, figures, page_css = notebook.render(st.executed, root, context)
            site.add(f"stages/{st.name}.html", html)
            headings[st.name] = _HEADING.findall(html)
            for name, blob in figures.items():
                site.add(name, blob)
            css = css or page_css
    site.add("assets/notebook.css", notebook.notebook_css(css))
    for asset in ("site.css", "explorer.js"):
        site.add(f"assets/{asset}", (TEMPLATES / "assets" / asset).read_bytes())
    site.add(".nojekyll", b"")

    notes = lab_notes(root / "benchmarks" / "notes", env)
    for name, (_, markdown, page) in notes.items():
        site.add(f"notes/{name}.md", markdown)
        site.add(f"notes/{name}.html", page)

    data = traces.explorer_sets(root / "data", site.store, max_questions)
    site.add("explorer.html", explorer_page(env, data, site))

    claims, no_claims = read_claims(results)
    if claims:
        site.add("metrics/report.claims.json", (results / "report" / "claims.json").read_bytes())
    env.globals["page"] = page_link({s.name for s in stages if s.executed})
    env.globals["section"] = section_link(headings)
    costs, walls = cost_rows(root, results), stage_seconds(results)
    two_axis = results / "two_axis_eval" / "metrics.json"
    training = read_json(two_axis).get("training_table", {}) if two_axis.exists() else {}
    figures = [(st, result_figure(results, st, name, site), cap) for st, name, cap in KEY_FIGURES]
    site.add("index.html", env.get_template("index.html.j2").render(
        stamp=stamp_, stages=stages, claims=claims, no_claims=no_claims, forest=forest_figures(results, site),
        cross=cross_rows(results), cross_columns=CROSS_COLUMNS, training=training,
        cross_figure=result_figure(results, "two_axis_eval", "cross_system.png", site),
        costs=costs, walls=walls, cost_chart=cost_chart(costs, walls, site),
        key_figures=[(st, f, cap) for st, f, cap in figures if f], explorer_sets=list(data),
        notes=[(name, title) for name, (title, _, _) in notes.items()]))
    site.write(out)
    return {"pages": sorted(r for r in site.files if r.endswith(".html")), "stamp": stamp_,
            "missing": [s.name for s in stages if not s.executed],
            "bytes": sum(len(b) for b in site.files.values())}
