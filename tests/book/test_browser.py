"""The built book in a real browser: Debian's chromium driven by Playwright for Python.

Serves _build/html on 127.0.0.1 (a thread running http.server on a free port) and opens the
index and every page listed in _toc.yml. Every request that would leave 127.0.0.1 is blocked
and recorded. For each page it asserts:

* no console errors, page errors, failed requests or HTTP errors;
* the maths is typeset: every Sphinx `.math` element holds a MathJax `mjx-container`, there
  are no MathJax errors, and no raw `$$`, `$...$`, `\\(`, `\\[` or `\\begin{` is left in the
  text (code blocks excluded);
* every image loaded (complete, naturalWidth > 0);
* every internal link (a, link, script, img) resolves to a file of the site, and a link with
  a fragment to an element with that id;
* on chapter pages, the Binder and Colab buttons open this page's .ipynb in the repository
  of `_config.yml`, and the .ipynb and .py download buttons download exactly the committed
  notebooks/NN_topic.ipynb and notebooks/NN_topic.py.

* a first load (empty cache, a 1280 x 900 window, until the network is idle) moves at most
  1.0 MB gzip and 2.5 MB uncompressed, and the page's images load lazily;
* every page has the Cite menu (the index's cite section, cite.bib, CITATION.cff, made from
  CITATION.cff) and the build stamp in its footer, and its download menu offers the whole
  book's PDF and "Print this page", which prints every folded proof and block.

It also opens a page with maths from file:// with every request blocked (the reader on a
plane), and checks the claims ledger page against book/claims.yml.

Screenshots: test-artifacts/screenshots/<docname with '/' as '__'>.png, and offline_*.png.
Without chromium or _build/html the tests skip, except in CI (env var CI set), where they
fail. Run: `pytest -m browser tests/book/test_browser.py` after building the book.
"""

from __future__ import annotations

import functools
import gzip
import http.server
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from urllib.parse import unquote, urljoin, urlparse

import pytest
import yaml

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[2]
SITE = ROOT / "_build" / "html"
SHOTS = ROOT / "test-artifacts" / "screenshots"
CHROMIUM = Path(os.environ.get("CHROMIUM_PATH", "/usr/bin/chromium"))
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

sys.path.insert(0, str(ROOT / "book" / "_ext"))
import cite_stamp  # noqa: E402
import claims_ledger  # noqa: E402


def _is_notebook(docname: str) -> bool:
    return (ROOT / f"{docname}.ipynb").is_file()


PAGES = claims_ledger.toc_pages(ROOT)  # the root first
CHAPTERS = [p for p in PAGES if _is_notebook(p)]
CONFIG = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))
BOOK_PDF = CONFIG["latex"]["latex_documents"]["targetname"].removesuffix(".tex") + ".pdf"


def _unavailable(reason: str):
    if os.environ.get("CI"):
        pytest.fail(f"{reason}; CI is set, so the browser tests must run")
    pytest.skip(reason)


# ------------------------------------------------------------------ fixtures


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    """Serves the site as GitHub Pages does: text compressed with gzip when the browser
    accepts it, so a page's measured weight is what a reader's connection carries."""

    COMPRESSED = {".html", ".js", ".css", ".svg", ".json", ".txt", ".inv"}

    def log_message(self, *args):
        pass

    def do_GET(self):
        path = Path(self.translate_path(self.path))
        if path.is_dir():
            path = path / "index.html"
        if (path.suffix not in self.COMPRESSED or not path.is_file()
                or "gzip" not in self.headers.get("Accept-Encoding", "")):
            return super().do_GET()
        body = gzip.compress(path.read_bytes(), mtime=0)
        self.send_response(200)
        self.send_header("Content-Type", self.guess_type(str(path)))
        self.send_header("Content-Encoding", "gzip")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture(scope="module")
def site_url():
    if not (SITE / "index.html").is_file():
        _unavailable(f"no built book at {SITE} (run scripts/build_book.sh first)")
    handler = functools.partial(_QuietHandler, directory=str(SITE))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="module")
def browser():
    if not CHROMIUM.is_file():
        _unavailable(f"Debian's chromium not found at {CHROMIUM} (bash scripts/install_browser.sh)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _unavailable("playwright (Python) is not installed")
    playwright = sync_playwright().start()
    browser = playwright.chromium.launch(
        executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS
    )
    yield browser
    browser.close()
    playwright.stop()


class Visit:
    """One page opened in chromium, with everything the tests look at."""

    def __init__(self, browser, url: str, shot: Path, local_hosts=("127.0.0.1",),
                 width: int = 1280):
        self.url = url
        self.errors: list[str] = []
        self.external: list[str] = []
        context = browser.new_context(
            viewport={"width": width, "height": 900}, accept_downloads=True
        )
        self.context = context
        page = context.new_page()
        self.page = page
        page.on(
            "console",
            lambda m: m.type == "error" and self.errors.append(f"console.error: {m.text}"),
        )
        page.on("pageerror", lambda e: self.errors.append(f"page error: {e}"))
        page.on(
            "requestfailed",
            lambda r: self.errors.append(f"request failed: {r.url} ({r.failure})"),
        )
        page.on(
            "response",
            lambda r: r.status >= 400 and self.errors.append(f"HTTP {r.status}: {r.url}"),
        )

        def route(route):
            url = route.request.url
            scheme, host = urlparse(url).scheme, urlparse(url).hostname
            if scheme in ("data", "blob") or (scheme == "file" and "file" in local_hosts) or (
                scheme in ("http", "https") and host in local_hosts
            ):
                route.continue_()
            else:
                self.external.append(url)
                route.abort()

        page.route("**/*", route)
        page.goto(url, wait_until="load")
        # a reader's first load: what arrives until the maths is typeset and the network is
        # idle, before anything below is forced to load (the lazy images)
        page.evaluate(
            """async () => {
                if (window.MathJax && window.MathJax.startup && window.MathJax.startup.promise) {
                    await window.MathJax.startup.promise;
                }
            }"""
        )
        page.wait_for_load_state("networkidle")
        self.first_load = page.evaluate(
            """() => {
                const all = performance.getEntriesByType('navigation')
                    .concat(performance.getEntriesByType('resource'));
                return {raw: all.reduce((a, r) => a + (r.decodedBodySize || 0), 0),
                        gzip: all.reduce((a, r) => a + (r.transferSize || 0), 0),
                        requests: all.length};
            }"""
        )
        page.evaluate(
            """async () => {
                document.querySelectorAll('img[loading="lazy"]').forEach(i => i.loading = 'eager');
                await Promise.all([...document.images].map(i => i.complete ? null :
                    new Promise(r => {
                        i.addEventListener('load', r); i.addEventListener('error', r);
                    })));
                if (window.MathJax && window.MathJax.startup && window.MathJax.startup.promise) {
                    await window.MathJax.startup.promise;
                }
            }"""
        )
        self.mathjax_loaded = page.evaluate(
            "() => !!(window.MathJax && window.MathJax.startup && window.MathJax.version)"
        )
        self.facts = page.evaluate(
            r"""() => {
                const math = [...document.querySelectorAll('.math')];
                const main = document.querySelector('main') || document.body;
                const clone = main.cloneNode(true);
                clone.querySelectorAll(
                    'pre, code, script, style, textarea, mjx-container, .highlight'
                ).forEach(e => e.remove());
                const text = clone.textContent;
                const raw = [];
                for (const token of ['$$', '\\(', '\\[', '\\begin{']) {
                    if (text.includes(token)) raw.push(token);
                }
                const inline = text.match(/\$[^$\s][^$\n]*\$/);
                if (inline) raw.push(inline[0]);
                // any other dollar, a TeX command (\word) or a MyST role ({name}`...`, {name})
                // left as text: the source was not parsed as maths or markup
                const near = (i) => JSON.stringify(text.slice(Math.max(0, i - 30), i + 30));
                for (const re of [/\$/g, /\\[A-Za-z]+/g, /\{[a-z][a-z-]*(:[a-z-]+)*\}/g]) {
                    for (const m of text.matchAll(re)) raw.push(`${m[0]} in ${near(m.index)}`);
                }
                const attr = (sel, name) => [...document.querySelectorAll(sel)]
                    .map(e => e.getAttribute(name)).filter(v => v !== null);
                const root = document.documentElement;
                const folded = (e) => !!e.closest('details, .toggle-hidden, .tag_hide-output');
                const resources = performance.getEntriesByType('navigation')
                    .concat(performance.getEntriesByType('resource'));
                return {
                    math: math.length,
                    untypeset: math.filter(e => !e.querySelector('mjx-container'))
                                   .map(e => e.textContent.slice(0, 80)),
                    mathjaxErrors: document.querySelectorAll('mjx-merror, [data-mjx-error]').length,
                    raw: raw,
                    images: [...document.images].map(i => ({
                        src: i.getAttribute('src'), ok: i.complete && i.naturalWidth > 0})),
                    figures: [...(main.querySelector('article') || main)
                              .querySelectorAll('img')].map(i => {
                        const fig = i.closest('figure');
                        const cap = fig && fig.querySelector('figcaption');
                        // textContent: a figure folded into the audit trail is captioned too
                        const text = (e) => e.textContent.replace(/\s+/g, ' ').trim();
                        return {src: i.getAttribute('src'), alt: i.getAttribute('alt') || '',
                                caption: cap ? text(cap) : '',
                                number: cap && cap.querySelector('.caption-number')
                                    ? text(cap.querySelector('.caption-number')) : '',
                                id: fig ? fig.id : '',
                                natural: i.naturalWidth, shown: i.getBoundingClientRect().width};
                    }),
                    height: root.scrollHeight,
                    overflow: root.scrollWidth - root.clientWidth,
                    tables: main.querySelectorAll('table').length,
                    tablesMain: [...main.querySelectorAll('table')].filter(t => !folded(t)).length,
                    bytes: resources.reduce((a, r) => a + (r.transferSize || 0), 0),
                    decodedBytes: resources.reduce((a, r) => a + (r.decodedBodySize || 0), 0),
                    requests: resources.length,
                    refs: [...attr('a[href]', 'href'), ...attr('link[href]', 'href'),
                           ...attr('script[src]', 'src'), ...attr('img[src]', 'src')],
                    title: document.title,
                };
            }"""
        )
        shot.parent.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(shot), full_page=True, timeout=180_000)  # tall pages

    def close(self):
        self.context.close()


def _shot_name(docname: str) -> str:
    return docname.replace("/", "__") + ".png"


MEASURES = ROOT / "test-artifacts" / "page_measures.json"
PHONE_WIDTH = 390


def _visits(browser, site_url, width: int):
    opened: dict[str, Visit] = {}
    suffix = "" if width == 1280 else f"@{width}"

    def visit(docname: str) -> Visit:
        if docname not in opened:
            opened[docname] = Visit(
                browser, urljoin(site_url, f"{docname}.html"),
                SHOTS / _shot_name(docname + suffix), width=width,
            )
        return opened[docname]

    return opened, visit


def _record(opened: dict[str, Visit], width: int) -> None:
    """Page height, tables (all / outside folded sections), bytes and requests of a first
    load, per page, into test-artifacts/page_measures.json (one entry per width)."""
    data = json.loads(MEASURES.read_text()) if MEASURES.is_file() else {}
    data.setdefault(str(width), {}).update({  # a run of some pages keeps the others'
        name: {**{key: v.facts[key] for key in ("height", "tables", "tablesMain", "bytes",
                                                 "decodedBytes", "requests", "overflow")},
               **{f"firstLoad{k.capitalize()}": n for k, n in v.first_load.items()}}
        for name, v in opened.items()
    })
    MEASURES.parent.mkdir(parents=True, exist_ok=True)
    MEASURES.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")


@pytest.fixture(scope="module")
def visits(browser, site_url):
    opened, visit = _visits(browser, site_url, 1280)
    yield visit
    _record(opened, 1280)
    for v in opened.values():
        v.close()


@pytest.fixture(scope="module")
def phone_visits(browser, site_url):
    opened, visit = _visits(browser, site_url, PHONE_WIDTH)
    yield visit
    _record(opened, PHONE_WIDTH)
    for v in opened.values():
        v.close()


def _local_target(ref: str, page_url: str, site_url: str) -> tuple[Path, str] | None:
    """The site file (and fragment) an internal reference points to; None if external."""
    if ref.startswith(("javascript:", "mailto:", "data:", "tel:")) or ref in ("", "#"):
        return None
    absolute = urljoin(page_url, ref)
    if not absolute.startswith(site_url):
        return None
    parsed = urlparse(absolute)
    path = unquote(parsed.path[len(urlparse(site_url).path):])
    target = SITE / path
    if path == "" or path.endswith("/"):
        target = target / "index.html"
    return target, unquote(parsed.fragment)


_ids_cache: dict[Path, set[str]] = {}


def _ids(file: Path) -> set[str]:
    if file not in _ids_cache:
        text = file.read_text(encoding="utf-8", errors="replace")
        _ids_cache[file] = set(re.findall(r'\b(?:id|name)="([^"]+)"', text))
    return _ids_cache[file]


# ------------------------------------------------------------------ every page


@pytest.mark.parametrize("docname", PAGES)
def test_page_loads_without_errors_or_outside_requests(visits, docname):
    v = visits(docname)
    assert not v.errors, f"{docname}: " + "\n".join(v.errors)
    assert not v.external, f"{docname} asked for resources off this machine: {v.external}"


@pytest.mark.parametrize("docname", PAGES)
def test_maths_is_typeset(visits, docname):
    v = visits(docname)
    f = v.facts
    if f["math"]:
        assert v.mathjax_loaded, f"{docname}: {f['math']} maths elements but MathJax did not load"
    assert not f["untypeset"], f"{docname}: maths left untypeset: {f['untypeset']}"
    assert f["mathjaxErrors"] == 0, f"{docname}: MathJax reported errors"
    assert not f["raw"], (
        f"{docname}: raw TeX or MyST left in the text (outside maths and code):\n"
        + "\n".join(f["raw"]))


@pytest.mark.parametrize("docname", PAGES)
def test_every_image_loaded(visits, docname):
    broken = [i["src"] for i in visits(docname).facts["images"] if not i["ok"]]
    assert not broken, f"{docname}: images that did not load: {broken}"


@pytest.mark.parametrize("docname", CHAPTERS)
def test_every_chapter_shows_its_figures(visits, docname):
    """Every theorem and experiment chapter has at least one figure, and it is on the page:
    a build whose kernels ran without the inline backend (e.g. MPLBACKEND=Agg) has none."""
    loaded = [i for i in visits(docname).facts["images"] if i["ok"] and "_images/" in i["src"]]
    assert loaded, f"{docname}: no executed figure on the page"


@pytest.mark.parametrize("width", [1280, PHONE_WIDTH])
@pytest.mark.parametrize("docname", PAGES)
def test_no_page_scrolls_sideways(visits, phone_visits, docname, width):
    """At a 1280-px window and on a 390-px phone the page itself is never wider than the
    window (a block may scroll inside its own box; the page may not)."""
    v = (visits if width == 1280 else phone_visits)(docname)
    assert v.facts["overflow"] <= 0, (
        f"{docname} at {width} px: the page is {v.facts['overflow']} px wider than the window")


_FILE_NAME = re.compile(r"(^|/)[\w.-]+\.(png|svg|jpe?g|gif)$", re.IGNORECASE)


@pytest.mark.parametrize("docname", PAGES)
def test_every_figure_is_captioned_numbered_and_described(visits, docname):
    """Every figure in a page's text (a chapter's output or a figure of book/, folded or
    not) sits in a figure with an id (cross-referenceable), a number ("Fig. 3") and a
    caption, and its alt text says what it shows: words, not a file name."""
    problems = []
    for fig in visits(docname).facts["figures"]:
        where = fig["src"]
        if not fig["id"]:
            problems.append(f"{where}: not in a figure with an id")
        if not fig["number"].startswith("Fig."):
            problems.append(f"{where}: no figure number")
        if len(fig["caption"]) - len(fig["number"]) < 20:
            problems.append(f"{where}: caption {fig['caption']!r} says too little")
        alt = fig["alt"].strip()
        if len(alt.split()) < 8 or _FILE_NAME.search(alt):
            problems.append(f"{where}: alt text {alt!r} does not describe the figure")
    assert not problems, f"{docname}:\n" + "\n".join(problems)


@pytest.mark.parametrize("docname", PAGES)
def test_raster_figures_are_sharp_on_high_density_screens(visits, docname):
    """A PNG figure has at least 1.9 image pixels per page pixel (rendered at 200 dpi,
    shown at 100): not soft on a phone or a laptop's high-density screen."""
    soft = [f"{f['src']}: {f['natural']} px shown at {f['shown']:.0f} px"
            for f in visits(docname).facts["figures"]
            if f["src"].lower().endswith(".png") and f["shown"] > 0
            and f["natural"] < 1.9 * f["shown"]]
    assert not soft, f"{docname}: soft figures:\n" + "\n".join(soft)


MAX_CHAPTER_HEIGHT = 18_000
MAX_MAIN_TABLES = 10
#: Chapters not yet restructured into argument + folded audit trail (issue 26), with what the
#: last build measured at 1280 px; strict: a chapter that comes under the targets fails here
#: until its entry is removed. Empty since chapters 3, 7 and 8 were folded.
TOO_TALL: dict[str, tuple[str, bool]] = {}


@pytest.mark.parametrize("docname", [
    pytest.param(d, marks=pytest.mark.xfail(strict=TOO_TALL[d][1], reason=(
        f"not yet folded (issue 26): {TOO_TALL[d][0]}"))) if d in TOO_TALL else d
    for d in CHAPTERS])
def test_chapter_height_and_tables_stay_readable(visits, docname):
    """A chapter is an argument, not an audit trail: at 1280 px no chapter is taller than
    18,000 px, and at most 10 tables stand in its main text (the rest are folded)."""
    f = visits(docname).facts
    assert f["height"] <= MAX_CHAPTER_HEIGHT and f["tablesMain"] <= MAX_MAIN_TABLES, (
        f"{docname}: {f['height']} px tall (at most {MAX_CHAPTER_HEIGHT}), "
        f"{f['tablesMain']} unfolded tables (at most {MAX_MAIN_TABLES})")


FIRST_LOAD_RAW = 2_500_000
FIRST_LOAD_GZIP = 1_000_000


@pytest.mark.parametrize("docname", PAGES)
def test_first_load_is_light(visits, docname):
    """A reader's first visit (empty cache) moves at most 1.0 MB over a connection that
    compresses text as GitHub Pages does, and 2.5 MB uncompressed (issue 39): MathJax as the
    components the page uses, no icon script, images below the first screen not yet."""
    first = visits(docname).first_load
    assert first["requests"] >= 10, f"{docname}: the measure saw only {first}"  # a real load
    assert first["gzip"] <= FIRST_LOAD_GZIP and first["raw"] <= FIRST_LOAD_RAW, (
        f"{docname}: a first load moves {first['gzip'] / 1e6:.2f} MB gzip (at most "
        f"{FIRST_LOAD_GZIP / 1e6}), {first['raw'] / 1e6:.2f} MB uncompressed (at most "
        f"{FIRST_LOAD_RAW / 1e6}) in {first['requests']} requests")


@pytest.mark.parametrize("docname", PAGES)
def test_images_load_lazily(docname):
    """Every image of a page's text has loading="lazy" (book/_ext/site_fixes.py): the
    browser fetches a figure, folded or below the first screen, when the reader gets near."""
    if not (SITE / f"{docname}.html").is_file():
        _unavailable(f"no built book at {SITE}")
    html = (SITE / f"{docname}.html").read_text(encoding="utf-8")
    body = html[html.find("<article"):html.rfind("</article>")]  # the page's text
    eager = [tag for tag in re.findall(r"<img\b[^>]*>", body) if 'loading="lazy"' not in tag]
    assert not eager, f"{docname}: images that load at once: {eager}"


def _git(*args: str) -> str | None:
    if shutil.which("git") is None:
        return None
    done = subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True)
    return done.stdout.strip() if done.returncode == 0 else None


@pytest.mark.parametrize("docname", PAGES)
def test_every_page_has_the_cite_menu_and_the_build_stamp(visits, docname):
    """The Cite menu leads to the index's cite section, cite.bib and CITATION.cff; the
    footer says when and from which commit the book was built: a commit of this checkout's
    history (HEAD or before it), or, built without git, that no commit is recorded."""
    page = visits(docname).page
    hrefs = page.eval_on_selector_all(".dropdown-cite-buttons a[href]",
                                      "as => as.map(a => a.getAttribute('href'))")
    root = PAGES[0]
    section = ("" if docname == root else f"{root.split('/')[-1]}.html") + (
        f"#{cite_stamp.CITE_SECTION}")
    assert len(hrefs) == 3 and (hrefs[0] == section or hrefs[0].endswith("/" + section)), (
        f"{docname}: the Cite menu links {hrefs}")
    assert hrefs[1].endswith(cite_stamp.BIB) and hrefs[2].endswith(cite_stamp.CFF), hrefs
    stamp = " ".join(page.inner_text("footer .companion-build-stamp").split())
    match = re.fullmatch(r"Built on (\d{4}-\d{2}-\d{2}) (?:from commit ([0-9a-f]{7}) "
                         r"\(\d{4}-\d{2}-\d{2}\)(?: with uncommitted changes)?|outside a git "
                         r"checkout: no commit recorded)\.", stamp)
    assert match, f"{docname}: footer stamp {stamp!r}"
    if match.group(2) and _git("rev-parse", "HEAD"):
        assert _git("merge-base", "--is-ancestor", match.group(2), "HEAD") is not None, (
            f"{docname}: built from {match.group(2)}, which is not in this checkout's history")


def test_the_index_shows_how_to_cite_from_citation_cff(visits, site_url):
    """The cite section's BibTeX, and cite.bib, are made from CITATION.cff as it is now;
    the site serves CITATION.cff itself."""
    cff = cite_stamp.read_citation(ROOT)
    page = visits(PAGES[0]).page
    section = page.locator(f"#{cite_stamp.CITE_SECTION}")
    assert section.count() == 1, "no cite section on the index"
    shown = section.locator("pre").inner_text()
    assert shown.strip() == cite_stamp.bibtex(cff).strip()
    assert cite_stamp.reference_text(cff).split(" [")[0] in section.inner_text()
    assert (SITE / cite_stamp.BIB).read_text(encoding="utf-8") == cite_stamp.bibtex(cff)
    assert (SITE / cite_stamp.CFF).read_bytes() == (ROOT / cite_stamp.CFF).read_bytes()


@pytest.mark.parametrize("docname", PAGES)
def test_download_menu_offers_the_book_pdf_and_print(visits, docname):
    """The download menu's first entry is the whole book's PDF; the theme's ".pdf", which
    prints the page, is called "Print this page"."""
    page = visits(docname).page
    entries = page.eval_on_selector_all(
        ".dropdown-download-buttons li > *",
        "es => es.map(e => [e.innerText.trim(), e.getAttribute('href'),"
        " e.getAttribute('onclick')])")
    texts = [text for text, _, _ in entries]
    assert texts[0] == "Book (.pdf)" and entries[0][1].endswith(BOOK_PDF), entries
    assert ["Print this page", None, "window.print()"] in [list(e) for e in entries], entries
    assert ".pdf" not in texts, f"{docname}: an entry still says only '.pdf': {texts}"


def test_the_book_pdf_is_in_the_site():
    """scripts/build_pdf.sh copies the PDF beside index.html, where every menu links it."""
    if not (SITE / "index.html").is_file():
        _unavailable(f"no built book at {SITE}")
    if not (SITE / BOOK_PDF).is_file():
        _unavailable(f"no {BOOK_PDF} in the site (run scripts/build_pdf.sh after the book)")
    assert (SITE / BOOK_PDF).read_bytes()[:5] == b"%PDF-"


@pytest.mark.parametrize("docname", CHAPTERS)
def test_printing_a_chapter_prints_its_folded_proofs(browser, site_url, docname):
    """Chromium's print to PDF of a chapter holds every proof of the page, folded ones
    (dropdowns) included, not faded by an opening animation, and the page's folds are as
    they were afterwards."""
    if shutil.which("pdftotext") is None:
        _unavailable("pdftotext (poppler-utils, installed by scripts/build_pdf.sh) is missing")
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    try:
        page = context.new_page()
        page.route("**/*", lambda r: r.continue_() if urlparse(r.request.url).hostname
                   in ("127.0.0.1", None) else r.abort())
        page.goto(urljoin(site_url, f"{docname}.html"), wait_until="load")
        page.wait_for_load_state("networkidle")
        folded = page.evaluate("document.querySelectorAll('details:not([open])').length")
        proofs = page.evaluate("""() => { document.querySelectorAll('details')
            .forEach(d => d.open = true); const n = (document.querySelector('main')
            .innerText.match(/Proof\\. /g) || []).length; return n; }""")
        page.evaluate("document.querySelectorAll('details').forEach(d => d.open = false)")
        page.reload(wait_until="load")
        page.wait_for_load_state("networkidle")
        page.emulate_media(media="print")  # at the moment of printing, nothing fades in
        faded = page.evaluate("""() => { window.dispatchEvent(new Event('beforeprint'));
            const faded = [...document.querySelectorAll('details[open] > summary ~ *')]
                .filter(e => getComputedStyle(e).opacity !== '1').length;
            window.dispatchEvent(new Event('afterprint')); return faded; }""")
        page.emulate_media(media="screen")
        assert faded == 0, f"{docname}: {faded} opened blocks print faded (an animation)"
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "page.pdf"
            page.pdf(path=str(out))
            text = subprocess.run(["pdftotext", str(out), "-"], capture_output=True,
                                  text=True, check=True).stdout
        printed = len(re.findall(r"Proof\. ", " ".join(text.split()) + " "))
        assert printed == proofs, f"{docname}: {printed} of {proofs} proofs printed"
        after = page.evaluate("document.querySelectorAll('details:not([open])').length")
        assert after == folded, f"{docname}: {folded} blocks folded before printing, {after} after"
    finally:
        context.close()


def test_the_index_links_the_proof_index(visits):
    refs = visits(PAGES[0]).facts["refs"]
    assert any(r.split("#")[0].endswith("prf-prf.html") for r in refs), refs


def test_no_source_maps_are_shipped():
    """The site ships no source maps (*.map): megabytes no reader needs."""
    if not (SITE / "index.html").is_file():
        _unavailable(f"no built book at {SITE}")
    maps = sorted(str(p.relative_to(SITE)) for p in SITE.rglob("*.map"))
    assert not maps, f"source maps in the site: {maps}"


@pytest.mark.parametrize("docname", PAGES)
def test_every_internal_link_resolves(visits, site_url, docname):
    v = visits(docname)
    broken = []
    for ref in v.facts["refs"]:
        target = _local_target(ref, v.url, site_url)
        if target is None or target[0] == SITE / BOOK_PDF:
            continue  # the book's PDF: test_the_book_pdf_is_in_the_site
        file, fragment = target
        if not file.is_file():
            broken.append(f"{ref} -> missing {file.relative_to(SITE)}")
        elif fragment and file.suffix == ".html" and fragment not in _ids(file):
            broken.append(f"{ref} -> no id {fragment!r} in {file.relative_to(SITE)}")
    assert not broken, f"{docname}: broken internal links:\n" + "\n".join(broken)


def test_the_book_has_pages_and_chapters():
    assert PAGES and PAGES[0] == yaml.safe_load((ROOT / "_toc.yml").read_text())["root"]
    assert CHAPTERS, "no notebook chapter in _toc.yml"


# Every block that shows code, output or a table; a block whose content is wider than its box
# scrolls sideways, and a reader at 1280 px sees it cut off. Folded cells (hide-input) are
# opened first: a reader who clicks "show code" must see the whole line too.
_SIDEWAYS = r"""() => {
    document.querySelectorAll('main details').forEach(d => { d.open = true; });
    const main = document.querySelector('main') || document.body;
    const blocks = main.querySelectorAll(
        'div.highlight pre, div.cell_output pre, div.output pre, pre, div.cell_output, '
        + 'div.output, div.pst-scrollable-table-container, table');
    const seen = new Set();
    const cut = [];
    for (const b of blocks) {
        if (seen.has(b) || b.clientWidth === 0) continue;
        seen.add(b);
        if (b.scrollWidth > b.clientWidth + 1) {
            const where = b.closest('div.cell_output') ? 'output'
                : b.closest('div.cell_input, div.highlight') ? 'code' : b.tagName.toLowerCase();
            cut.push(`${where} <${b.tagName.toLowerCase()} class="${b.className}">: `
                + `${b.scrollWidth} px of content in a ${b.clientWidth} px box: `
                + JSON.stringify((b.innerText || '').split('\n')
                    .reduce((a, l) => l.length > a.length ? l : a, '').slice(0, 100)));
        }
    }
    return cut;
}"""


def sideways_blocks(page) -> list[str]:
    """Code, output and table blocks on an open page that scroll sideways (empty: none)."""
    return page.evaluate(_SIDEWAYS)


@pytest.mark.parametrize("docname", PAGES)
def test_no_block_scrolls_sideways_at_1280_px(visits, docname):
    """Nothing is cut off: at a 1280-px window no code cell, output or table on any page is
    wider than its box (issue 17). Code lines are at most 88 characters, long results are
    HTML tables, and plain-text output wraps (book/_static/companion.css)."""
    page = visits(docname).page
    assert page.viewport_size["width"] == 1280
    cut = sideways_blocks(page)
    assert not cut, f"{docname}: {len(cut)} blocks scroll sideways:\n" + "\n".join(cut)


import paper_names  # noqa: E402  (book/_ext, on sys.path above)


@pytest.mark.parametrize("docname", CHAPTERS)
def test_proof_boxes_and_references_carry_one_set_of_names(visits, docname):
    """Every proof box shows the paper's letter (Theorem A ... Theorem G) or the companion's
    chapter number (Lemma 3.2), and no link says sphinx-proof's book-wide "Lemma 2"."""
    page = visits(docname).page
    captions = page.eval_on_selector_all(
        "div.proof[id] > p.admonition-title > span.caption-number",
        "spans => spans.map(s => [s.parentElement.parentElement.id, s.textContent.trim()])",
    )
    names = paper_names.box_names(ROOT)
    for label, caption in captions:
        if label in names:
            assert caption == names[label], (docname, label, caption, names[label])
    shown = dict(captions)
    for label, name in paper_names.PAPER_NAMES.items():
        if label in shown:
            assert shown[label] == name, (docname, label, shown[label], name)
    bare = page.eval_on_selector_all(
        "a.reference.internal",
        r"links => links.map(a => a.textContent.trim()).filter(t => "
        r"/^(Theorem|Lemma|Proposition|Corollary|Observation|Definition) \d+$/.test(t))",
    )
    assert not bare, f"{docname}: references with sphinx-proof's numbers: {bare}"


# ------------------------------------------------------------------ chapter pages


def _expected_launch_urls(docname: str) -> dict[str, str]:
    repo = CONFIG["repository"]
    org, name = urlparse(repo["url"]).path.strip("/").split("/")[:2]
    branch = repo.get("branch", "main")
    launch = CONFIG["launch_buttons"]
    ui = {"classic": "tree", "jupyterlab": "lab/tree"}[launch.get("notebook_interface", "classic")]
    path = f"{docname}.ipynb"
    return {
        "binder": f"{launch['binderhub_url'].rstrip('/')}/v2/gh/{org}/{name}/{branch}"
        f"?urlpath={ui}/{path}",
        "colab": f"{launch['colab_url'].rstrip('/')}/github/{org}/{name}/blob/{branch}/{path}",
    }


@pytest.mark.parametrize("docname", CHAPTERS)
def test_launch_buttons_open_this_pages_notebook(visits, docname):
    page = visits(docname).page
    hrefs = page.eval_on_selector_all(
        ".dropdown-launch-buttons a[href], a.btn-launch-buttons[href], "
        "[class*='launch'] a[href]",
        "els => els.map(e => e.href)",
    )
    for service, url in _expected_launch_urls(docname).items():
        assert url in hrefs, f"{docname}: no {service} button to {url}; launch links: {hrefs}"
    assert (ROOT / f"{docname}.ipynb").is_file()


@pytest.mark.parametrize("suffix", [".ipynb", ".py"])
@pytest.mark.parametrize("docname", CHAPTERS)
def test_download_buttons_give_the_committed_files(visits, docname, suffix):
    page = visits(docname).page
    menu = page.locator("button[aria-label='Download this page']")
    assert menu.count() == 1, f"{docname}: no download menu"
    menu.first.click()
    items = page.locator(".dropdown-download-buttons a")
    texts = [t.strip() for t in items.all_inner_texts()]
    assert texts.count(suffix) == 1, f"{docname}: download menu offers {texts}, wanted one {suffix}"
    item = items.nth(texts.index(suffix))
    assert item.is_visible()
    with page.expect_download() as download:
        item.click()
    got = Path(download.value.path()).read_bytes()
    assert got == (ROOT / f"{docname}{suffix}").read_bytes(), (
        f"{docname}: the {suffix} download differs from the committed {docname}{suffix}"
    )
    page.keyboard.press("Escape")


# ------------------------------------------------------------------ offline and ledger


def test_maths_typesets_from_disk_with_no_network(browser):
    """A reader opens _build/html from disk with no network: maths still typesets."""
    if not (SITE / "index.html").is_file():
        _unavailable(f"no built book at {SITE}")
    with_math = [
        p for p in PAGES
        if (SITE / f"{p}.html").is_file()
        and 'class="math' in (SITE / f"{p}.html").read_text(encoding="utf-8")
    ]
    assert with_math, "no page of the book has maths"
    docname = with_math[0]
    v = Visit(
        browser,
        (SITE / f"{docname}.html").as_uri(),
        SHOTS / f"offline_{_shot_name(docname)}",
        local_hosts=("file",),
    )
    try:
        assert v.mathjax_loaded, "MathJax did not load from the site's own files"
        assert v.facts["math"] > 0 and not v.facts["untypeset"], v.facts["untypeset"]
        assert not v.external, f"asked the network for: {v.external}"
        assert not v.errors, v.errors
    finally:
        v.close()


def test_search_works_from_disk_with_no_network(browser):
    """The reader on a plane searches the book opened from disk: results come back, with no
    request off the disk. (Sphinx's search then fetches each hit's page for a summary line,
    which a browser refuses from file://: the hits come without summaries.)"""
    if not (SITE / "search.html").is_file():
        _unavailable(f"no built book at {SITE}")
    context = browser.new_context()
    errors: list[str] = []
    try:
        page = context.new_page()
        page.on("pageerror", lambda e: str(e) != "Failed to fetch" and errors.append(str(e)))
        page.route("**/*", lambda r: r.continue_() if r.request.url.startswith("file:")
                   else (errors.append(f"asked the network for {r.request.url}"), r.abort()))
        page.goto((SITE / "search.html").as_uri() + "?q=feature+rank", wait_until="load")
        page.wait_for_selector("#search-results ul.search li", timeout=60_000)
        hits = page.locator("#search-results ul.search li").count()
        assert hits > 0 and not errors, (hits, errors)
    finally:
        context.close()


def test_ledger_page_shows_the_data(visits):
    """The ledger page shows one fold per claim of book/claims.yml (id claim-<id>): its
    verdict as the ledger gives it, a link to the box that states it, and every test that
    checks it (issue 35: one line per claim, details folded)."""
    docname = "book/ledger"
    if docname not in PAGES:
        pytest.fail("book/ledger is not in _toc.yml")
    page = visits(docname).page
    rows = page.eval_on_selector_all(
        "details.ledger-row",
        """rows => rows.map(r => ({
            id: r.id || (r.closest('[id^="claim-"]') || {}).id || '',
            verdict: [...r.querySelectorAll('summary span.verdict')]
                .map(s => s.textContent.trim()),
            hrefs: [...r.querySelectorAll('summary a[href]')].map(a => a.getAttribute('href')),
            text: r.textContent}))""",
    )
    claims = claims_ledger.load_claims(ROOT)
    chapters = claims_ledger.toc_docnames(ROOT)
    assert len(rows) == len(claims), (
        f"ledger page has {len(rows)} rows, book/claims.yml {len(claims)}"
    )
    by_id = {row["id"]: row for row in rows}
    for claim in claims:
        row = by_id.get(f"claim-{claim['id']}")
        assert row is not None, f"no ledger row with id claim-{claim['id']}"
        want = claims_ledger.shown_verdict(
            claim, chapters, lambda t: claims_ledger.node_exists_statically(ROOT, t)
        )
        assert row["verdict"] == [want], (claim["id"], row["verdict"], want)
        if claim.get("proof"):
            assert any(h.endswith("#" + claim["proof"]) for h in row["hrefs"]), (
                f"{claim['id']}: no link to its proof box {claim['proof']}", row["hrefs"])
        for test in claim.get("tests") or []:
            assert test in "".join(row["text"].split()), (claim["id"], test)
