"""The published site (`make site`, src/mmrag/site/): built from the smoke pipeline's results into a
scratch folder, opened page by page in headless Chromium (Debian's `chromium` + `chromium-driver`,
installed by scripts/setup_browser.sh when missing), and checked for broken links, missing
images, JavaScript errors, inlined figures, machine paths, its size budget, and every number on
the index against the file it came from. Screenshots go to build/site-test/.

The smoke results come from the `smoke_repo` fixture (the same run test_pipeline.py uses). To
reuse a finished smoke run without letting the fixture bring it up to date first, point
MMRAG_SMOKE_RESULTS at its results folder (e.g. build/smoke/results).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import time
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest

from mmrag.site.build import build
from mmrag.stages.site import BUDGET_BYTES

ROOT = Path(__file__).resolve().parents[1]
ARTIFACTS = ROOT / "build" / "site-test"
SETUP = ROOT / "scripts" / "setup_browser.sh"


# --------------------------------------------------------------------------- fixtures
@pytest.fixture(scope="module")
def smoke_results(request: pytest.FixtureRequest) -> Path:
    given = os.environ.get("MMRAG_SMOKE_RESULTS")
    if given:
        return Path(given).resolve()
    return request.getfixturevalue("smoke_repo") / "results"


@pytest.fixture(scope="module")
def site(smoke_results: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site") / "docs"
    build(smoke_results, out)
    return out


@pytest.fixture(scope="module")
def browser():
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        pytest.fail("selenium is not installed: run `make env` (requirements/base.txt pins it), "
                    "or `.venv/bin/pip install selenium==4.52.0`")
    proc = subprocess.run(["bash", str(SETUP)], capture_output=True, text=True)
    chromium, driver_path = shutil.which("chromium"), shutil.which("chromedriver")
    if proc.returncode or not (chromium and driver_path):
        pytest.fail("headless Chromium is not available and scripts/setup_browser.sh could not install it "
                    f"({proc.stderr.strip()[-400:]}); fix: `sudo apt-get install -y chromium chromium-driver`")
    opts = webdriver.ChromeOptions()
    opts.binary_location = chromium
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=1280,1600", "--hide-scrollbars"):
        opts.add_argument(arg)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    drv = webdriver.Chrome(service=Service(executable_path=driver_path), options=opts)
    drv.set_page_load_timeout(30)
    yield drv
    drv.quit()


# --------------------------------------------------------------------------- helpers
class _Ids(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.ids: set[str] = set()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for k, v in attrs:
            if k in ("id", "name") and v:
                self.ids.add(v)


def ids_of(page: Path, cache: dict[Path, set[str]]) -> set[str]:
    if page not in cache:
        p = _Ids()
        p.feed(page.read_text(encoding="utf-8"))
        cache[page] = p.ids
    return cache[page]


def local_target(url: str, site: Path) -> tuple[Path, str] | None:
    """(file, fragment) of a file:// URL inside the site; None for other schemes."""
    u = urlparse(url)
    if u.scheme != "file":
        return None
    return Path(unquote(u.path)), u.fragment


def html_pages(site: Path) -> list[Path]:
    return sorted(site.rglob("*.html"))


def walk(obj, key):
    for k in key:
        obj = obj[k]
    return obj


def shown_matches(text: str, value) -> bool:
    """The text the index shows equals the file's value to the digits shown."""
    text = text.strip()
    if value is None:
        return text == "–"
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    decimals = len(text.split(".")[1]) if "." in text else 0
    return abs(float(text) - float(value)) <= 0.5 * 10 ** -decimals + 1e-9


class _Numbers(HTMLParser):
    """Every <span class="num"> of a page: (attributes, text)."""

    def __init__(self) -> None:
        super().__init__()
        self.found: list[tuple[dict[str, str | None], str]] = []
        self._open: dict[str, str | None] | None = None
        self._text = ""

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "span" and "num" in (a.get("class") or "").split():
            self._open, self._text = a, ""

    def handle_data(self, data: str) -> None:
        if self._open is not None:
            self._text += data

    def handle_endtag(self, tag: str) -> None:
        if tag == "span" and self._open is not None:
            self.found.append((self._open, self._text))
            self._open = None


# --------------------------------------------------------------------------- static checks
@pytest.mark.pipeline
@pytest.mark.slow
def test_site_has_every_rendered_stage_in_pipeline_order(site: Path, smoke_results: Path):
    import yaml

    from mmrag.site.build import SITE_STAGE

    stages = [s for s in yaml.safe_load((smoke_results.parent / "dvc.yaml").read_text())["stages"]
              if s != SITE_STAGE]  # the stage that builds the site is not a page of it
    index = (site / "index.html").read_text()
    rendered = [s for s in stages if (smoke_results / s / f"{s}.ipynb").exists()]
    assert rendered, "the smoke run rendered no notebook"
    for s in rendered:
        assert (site / "stages" / f"{s}.html").exists(), s
        page = (site / "stages" / f"{s}.html").read_text()
        assert f"../source/{s}.py.html" in page and "../source/" in page and f"../metrics/{s}.json" in page
    positions = [index.index(f'id="stage-{s}"') for s in stages]
    assert positions == sorted(positions), "the index lists the stages out of pipeline order"
    assert "Rendered from <strong>the run of" in index and "profile smoke" in index
    assert not re.search(r"\bcommit [0-9a-f]{7,}", index), "the site depends on its results, not on git"


@pytest.mark.pipeline
@pytest.mark.slow
def test_site_fits_its_size_budget_and_stores_each_figure_once_as_a_file(site: Path):
    size = sum(f.stat().st_size for f in site.rglob("*") if f.is_file())
    assert size <= BUDGET_BYTES, f"site is {size / 2**20:.1f} MiB (budget {BUDGET_BYTES / 2**20:.0f} MiB)"
    figures = list((site / "figures").iterdir())
    assert figures, "no figure was extracted"
    for f in figures:
        assert f.stem == hashlib.sha256(f.read_bytes()).hexdigest()[:16], f"{f.name} is not named by its content"
    for page in html_pages(site):
        assert "data:image/" not in page.read_text(encoding="utf-8"), f"{page.name} inlines an image"


@pytest.mark.pipeline
@pytest.mark.slow
def test_site_has_no_machine_paths(site: Path, smoke_results: Path):
    bad = [str(ROOT), str(smoke_results.parent), str(site.parent), "/root/", "/home/"]
    for f in site.rglob("*"):
        if f.is_file() and f.suffix in (".html", ".js", ".json", ".css", ".ipynb"):
            text = f.read_text(encoding="utf-8")
            for b in bad:
                assert b not in text, f"{f.relative_to(site)} contains the machine path {b}"


@pytest.mark.pipeline
@pytest.mark.slow
def test_every_number_on_the_index_is_the_one_in_its_file(site: Path, smoke_results: Path):
    parser = _Numbers()
    parser.feed((site / "index.html").read_text(encoding="utf-8"))
    assert parser.found, "the index shows no tagged number"
    files: dict[str, object] = {}

    def value(file: str, key: list):
        if file not in files:
            base = smoke_results if file.startswith("results/") else smoke_results.parent
            rel = file.removeprefix("results/") if file.startswith("results/") else file
            files[file] = json.loads((base / rel).read_text())
        return walk(files[file], key)

    checked = 0
    for attrs, text in parser.found:
        if attrs.get("data-sum"):
            expected = sum(value(f, k) for f, k in json.loads(attrs["data-sum"]))
        else:
            expected = value(attrs["data-file"], json.loads(attrs["data-key"]))
        assert shown_matches(text, expected), f"index shows {text!r} for {attrs} but the file has {expected!r}"
        checked += 1
    assert checked >= 10


@pytest.mark.pipeline
@pytest.mark.slow
def test_a_stage_without_a_rendered_notebook_is_named_not_fatal(smoke_results: Path, tmp_path: Path):
    results = tmp_path / "results"
    shutil.copytree(smoke_results, results, ignore=shutil.ignore_patterns("world.ipynb", "*.html", "*.log"))
    out = tmp_path / "docs"
    info = build(results, out, root=smoke_results.parent, max_questions=2)
    assert "world" in info["missing"] and not (out / "stages" / "world.html").exists()
    index = (out / "index.html").read_text()
    assert re.search(r"No rendered notebook yet for: [^<]*\bworld\b", index)
    assert (out / "stages" / "models.html").exists()


# --------------------------------------------------------------------------- in a browser
def _severe(drv) -> list[str]:
    return [e["message"] for e in drv.get_log("browser") if e["level"] in ("SEVERE", "ERROR")]


def _broken_images(drv) -> list[str]:
    """Images that did not load (waiting up to 5 s for those still loading)."""
    script = ("return Array.from(document.images).filter(i => !i.complete || i.naturalWidth === 0)"
              ".map(i => [i.src, i.complete])")
    for _ in range(50):
        pending = drv.execute_script(script)
        if not any(not done for _, done in pending):
            break
        time.sleep(0.1)
    return [src for src, _ in pending]


def _screenshot(drv, path: Path) -> None:
    height = drv.execute_script("return Math.min(document.documentElement.scrollHeight, 7000)")
    drv.set_window_size(1280, max(800, int(height)))
    path.parent.mkdir(parents=True, exist_ok=True)
    drv.save_screenshot(str(path))
    drv.set_window_size(1280, 1600)


@pytest.mark.pipeline
@pytest.mark.slow
def test_every_page_opens_in_chromium_without_broken_links_images_or_js_errors(site: Path, browser):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select, WebDriverWait

    t0 = time.time()
    id_cache: dict[Path, set[str]] = {}
    problems: list[str] = []
    pages = html_pages(site)
    assert (site / "index.html") in pages and (site / "explorer.html") in pages
    for page in pages:
        rel = page.relative_to(site)
        browser.get(page.as_uri())
        problems += [f"{rel}: console: {m}" for m in _severe(browser)]
        problems += [f"{rel}: image does not load: {src}" for src in _broken_images(browser)]
        resources = browser.execute_script(
            "return Array.from(document.querySelectorAll('script[src], link[href]'))"
            ".map(e => e.src || e.href)")
        problems += [f"{rel}: loads from outside the site: {u}" for u in resources if not u.startswith("file:")]
        for href in browser.execute_script(
                "return Array.from(document.querySelectorAll('a[href]')).map(a => a.href)"):
            target = local_target(href, site)
            if target is None:
                continue
            path, frag = target
            if not path.exists():
                problems.append(f"{rel}: broken link {href}")
            elif frag and path.suffix == ".html" and path.is_relative_to(site):
                ids = ids_of(path, id_cache)
                if frag not in ids and unquote(frag) not in ids and not frag.startswith(("set=", "L")):
                    problems.append(f"{rel}: link to a missing anchor {href}")
        if rel.as_posix() == "index.html":
            _screenshot(browser, ARTIFACTS / "index.png")
    # one stage page with figures, screenshotted
    stage_pages = sorted((site / "stages").glob("*.html"))
    with_figures = [p for p in stage_pages if "../figures/" in p.read_text()] or stage_pages
    browser.get(with_figures[0].as_uri())
    _screenshot(browser, ARTIFACTS / f"stage-{with_figures[0].stem}.png")
    # the explorer: every question set renders its first question, side by side, without an error
    browser.get((site / "explorer.html").as_uri())
    options = [o.get_attribute("value") for o in browser.find_elements(By.CSS_SELECTOR, "#set-picker option")]
    assert options, "the explorer lists no question set"
    for name in options:
        Select(browser.find_element(By.ID, "set-picker")).select_by_value(name)
        WebDriverWait(browser, 10).until(
            lambda d: d.find_elements(By.CSS_SELECTOR, "#answers article.trace")
            and f"set={name}&" in d.current_url)
        problems += [f"explorer ({name}): console: {m}" for m in _severe(browser)]
        problems += [f"explorer ({name}): image does not load: {src}" for src in _broken_images(browser)]
    Select(browser.find_element(By.ID, "set-picker")).select_by_value(options[0])
    WebDriverWait(browser, 10).until(lambda d: f"set={options[0]}&" in d.current_url)
    _screenshot(browser, ARTIFACTS / "explorer.png")
    assert not problems, "\n".join(problems[:40])
    assert time.time() - t0 < 120, "the browser test should stay well under a minute"


# --------------------------------------------------------------------------- the committed site
def test_committed_site_fits_the_budget_and_the_readme_states_what_it_was_rendered_from():
    docs = ROOT / "docs"
    assert (docs / "index.html").exists(), "docs/ has no site: run `make site` and commit docs/"
    size = sum(f.stat().st_size for f in docs.rglob("*") if f.is_file())
    assert size <= BUDGET_BYTES, f"docs/ is {size / 2**20:.1f} MiB (budget {BUDGET_BYTES / 2**20:.0f} MiB)"
    index = (docs / "index.html").read_text(encoding="utf-8")
    profile = re.search(r"<strong>profile ([^<]+)</strong>", index).group(1)
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    block = re.search(r"<!-- site:start -->\n(.*?)\n<!-- site:end -->", readme, re.S)
    assert block and "(docs/index.html)" in block.group(1), "README's first screen must link docs/index.html"
    assert readme.index("<!-- site:start -->") < 1500, "the site link belongs on the README's first screen"
    assert f"{profile}-profile run" in block.group(1), \
        "README's site line and docs/index.html disagree on the profile: run `make site`"
    assert not re.search(r"\b[0-9a-f]{7,40}\b", block.group(1)), "the README names no commit"


@pytest.mark.pipeline
@pytest.mark.slow
def test_lab_notes_are_rendered_with_their_links_and_listed_on_the_index(site):
    notes = sorted((ROOT / "benchmarks" / "notes").glob("*.md"))
    assert notes, "benchmarks/notes holds the lab notes"
    for note in notes:
        assert (site / "notes" / note.name).read_bytes() == note.read_bytes()
        page = (site / "notes" / f"{note.stem}.html").read_text(encoding="utf-8")
        assert "<h1>" in page and ".md)" not in page and ".md\"" not in page, note.name
        assert f'href="notes/{note.stem}.html"' in (site / "index.html").read_text(encoding="utf-8")
