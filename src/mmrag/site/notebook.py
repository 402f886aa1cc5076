"""An executed stage notebook -> one site page, with nbconvert's HTML exporter and a small template.

Images in the notebook's outputs are written once each as ``figures/<content hash>.<ext>`` (an
unchanged figure keeps its name, so git stores it once) and the page links them instead of
inlining base64. What a cell wrote to stderr (progress bars, library warnings) is left out: the
stage's log keeps it. Machine paths in the remaining outputs (the checkout, the environment's
site-packages, home and temporary folders) are cut down to what a reader needs.
"""

from __future__ import annotations

import base64
import hashlib
import io
import re
from pathlib import Path
from typing import Any

TEMPLATES = Path(__file__).parent / "templates"
IMAGE_TYPES = {"image/png": "png", "image/jpeg": "jpg", "image/gif": "gif", "image/svg+xml": "svg"}

_SITE_PACKAGES = re.compile(r"(?:/[^\s\"'<>:]+)?/(?:site|dist)-packages/")
_HOME_OR_TMP = re.compile(r"/(?:root|home/[^/\s\"'<>]+|tmp|var/tmp)/[^\s\"'<>:]*")


COMPACT_ABOVE = 256 * 1024  # a PNG larger than this (a grid of photos, as a rule) is stored as JPEG...
COMPACT_GAIN = 0.5  # ...when that at least halves it (line plots stay PNG: JPEG blurs their lines)
JPEG_QUALITY = 85


def compact(data: bytes, ext: str) -> tuple[bytes, str]:
    """(bytes, extension) to store: a large photo-like PNG becomes a JPEG (deterministic for the
    same input), anything else is kept as it is."""
    if ext != "png" or len(data) <= COMPACT_ABOVE:
        return data, ext
    from PIL import Image as PILImage

    with PILImage.open(io.BytesIO(data)) as im:
        rgba = im.convert("RGBA")
    flat = PILImage.new("RGB", rgba.size, "white")
    flat.paste(rgba, mask=rgba.getchannel("A"))
    buf = io.BytesIO()
    flat.save(buf, format="JPEG", quality=JPEG_QUALITY, optimize=True)
    jpeg = buf.getvalue()
    return (jpeg, "jpg") if len(jpeg) <= COMPACT_GAIN * len(data) else (data, ext)


def figure_name(data: bytes, ext: str) -> str:
    """figures/<first 16 hex digits of the sha256 of the bytes>.<ext>"""
    return f"figures/{hashlib.sha256(data).hexdigest()[:16]}.{ext}"


def scrub(text: str, root: Path) -> str:
    """Text without machine paths: the checkout becomes relative, site-packages is named alone,
    other home and temporary paths become '…'."""
    text = text.replace(str(root.resolve()) + "/", "").replace(str(root.resolve()), ".")
    text = _SITE_PACKAGES.sub("site-packages/", text)
    return _HOME_OR_TMP.sub("…", text)


def _scrub_output(out: Any, root: Path) -> None:
    if "text" in out:
        out["text"] = scrub(out["text"], root)
    if "traceback" in out:
        out["traceback"] = [scrub(t, root) for t in out["traceback"]]
    if "evalue" in out:
        out["evalue"] = scrub(out["evalue"], root)
    for mime in ("text/plain", "text/html", "text/markdown"):
        if mime in out.get("data", {}):
            value = out["data"][mime]
            out["data"][mime] = scrub("".join(value) if isinstance(value, list) else value, root)


def extract_figures(nb: Any, root: Path, prefix: str = "../") -> dict[str, bytes]:
    """Point every image output at ``<prefix>figures/<hash>.<ext>`` and return {name: bytes};
    scrub machine paths from every output and from the notebook's metadata."""
    figures: dict[str, bytes] = {}
    nb.metadata.pop("papermill", None)
    for cell in nb.cells:
        cell.metadata.pop("papermill", None)
        cell.metadata.pop("execution", None)
        if "outputs" not in cell:
            continue
        cell["outputs"] = [o for o in cell["outputs"]
                           if not (o.get("output_type") == "stream" and o.get("name") == "stderr")]
        for out in cell["outputs"]:
            _scrub_output(out, root)
            data = out.get("data", {})
            names = {}
            for mime, ext in IMAGE_TYPES.items():
                if mime not in data:
                    continue
                raw = data[mime]
                raw = "".join(raw) if isinstance(raw, list) else raw
                blob, stored = compact(raw.encode() if mime == "image/svg+xml" else base64.b64decode(raw), ext)
                name = figure_name(blob, stored)
                figures[name] = blob
                names[mime] = prefix + name
            if names:
                out.setdefault("metadata", {})["filenames"] = names
    return figures


def exporter() -> Any:
    """nbconvert's HTML exporter with the site's stage-page template (lab, offline)."""
    from nbconvert import HTMLExporter

    return HTMLExporter(extra_template_basedirs=[str(TEMPLATES)], template_name="stage_page",
                        exclude_anchor_links=False)


def render(path: Path, root: Path, site: dict[str, Any]) -> tuple[str, dict[str, bytes], list[str]]:
    """(page HTML, figures {name: bytes}, pygments CSS) of one executed notebook."""
    import nbformat

    nb = nbformat.read(str(path), as_version=4)
    figures = extract_figures(nb, root)
    body, resources = exporter().from_notebook_node(nb, resources={"site": site})
    if "data:image/" in body:
        raise ValueError(f"{path.name}: an image is still inlined in the page")
    return body, figures, list(resources.get("inlining", {}).get("css", []))


def notebook_css(pygments_css: list[str]) -> str:
    """The CSS every stage page shares: JupyterLab's light theme, the lab template's own rules
    and the code highlighting (what the lab template would inline in each page)."""
    lab = _lab_static()
    parts = [(lab / "index.css").read_text(), (lab / "theme-light.css").read_text(), *pygments_css,
             LAB_EXTRA_CSS]
    return "\n".join(parts)


def _lab_static() -> Path:
    """The lab template's static folder (where nbconvert installed it)."""
    for base in exporter().template_paths:
        for cand in (Path(base) / "static", Path(base) / "lab" / "static"):
            if (cand / "index.css").exists() and (cand / "theme-light.css").exists():
                return cand
    raise FileNotFoundError("nbconvert's lab template (static/index.css) was not found")


# the rules the lab template writes into each page's <style> (kept here once)
LAB_EXTRA_CSS = """
* { -webkit-print-color-adjust: exact; }
a.anchor-link { display: none; }
.jp-InputArea { overflow: hidden; }
.jp-InputArea-editor { overflow: hidden; }
.cm-editor.cm-s-jupyter .highlight pre { padding: var(--jp-code-padding) 4px; margin: 0;
  font-family: inherit; font-size: inherit; line-height: inherit; color: inherit; }
.jp-OutputArea-output pre { line-height: inherit; font-family: inherit; }
.jp-RenderedText pre { color: var(--jp-content-font-color1); font-size: var(--jp-code-font-size); }
.jp-Collapser { display: none; }
@page { margin: 0.5in; }
@media print { .jp-Cell-inputWrapper, .jp-Cell-outputWrapper { display: block; } }
"""
