"""How to cite the book, and which commit a build is: both from the repository, not typed.

* **Cite.** ``CITATION.cff`` is read at build time. The root page (the index) ends with a
  section "Cite this book" holding the CFF's message, a one-line reference, and BibTeX for
  the companion and for each work the CFF lists under ``references`` (the paper); the site
  serves the BibTeX as ``cite.bib`` and the CFF itself as ``CITATION.cff``. Every page's
  header gets a "Cite" menu (a quote icon) with those three: the section, ``cite.bib`` and
  ``CITATION.cff``.
* **Stamp.** Every page's footer (and the PDF's title page) says when the book was built
  and from which commit: ``git rev-parse HEAD`` and the commit's date, "with uncommitted
  changes" when the work tree differs from it, or "outside a git checkout" when there is no
  git (an sdist, a tarball), which builds all the same. ``SOURCE_DATE_EPOCH``, when set,
  fixes the build date (reproducible builds).

The stamp lives in ``html_theme_options``, which Sphinx compares between builds, so a new
commit or day rewrites every page's footer, not only the pages whose source changed.
"""

from __future__ import annotations

import datetime as dt
import html
import os
import re
import shutil
import subprocess
import textwrap
from pathlib import Path

import yaml
from docutils import nodes
from sphinx import addnodes
from sphinx.application import Sphinx
from sphinx.transforms import SphinxTransform

ROOT = Path(__file__).resolve().parents[2]
CFF = "CITATION.cff"
BIB = "cite.bib"
CITE_SECTION = "cite-this-book"
CITE_GROUP = "cite-buttons"


# ------------------------------------------------------------------ citation


def read_citation(root: Path = ROOT) -> dict:
    return yaml.safe_load((root / CFF).read_text(encoding="utf-8"))


def _year(work: dict) -> str:
    for key in ("year", "date-released", "date-published"):
        if work.get(key):
            return str(work[key])[:4]
    return ""


def _names(work: dict, bibtex: bool) -> list[str]:
    names = []
    for person in work.get("authors", []):
        if "name" in person:  # an entity: a team, an institution
            names.append("{" + person["name"] + "}" if bibtex else person["name"])
        elif bibtex:
            names.append(f"{person['family-names']}, {person.get('given-names', '')}".strip(", "))
        else:
            initials = " ".join(f"{g[0]}." for g in person.get("given-names", "").split())
            names.append(f"{person['family-names']}, {initials}".strip(", "))
    return names


def _key(work: dict) -> str:
    first = work.get("authors", [{}])[0]
    who = first.get("family-names") or first.get("name", "anon").split()[-1]
    word = next((w for w in re.findall(r"[A-Za-z]+", work["title"])
                 if w.lower() not in {"a", "an", "the", "of", "on", "in", "for", "and", "to"}),
                "work")
    return re.sub(r"\W", "", f"{who}{_year(work)}{word}").lower()


def _bibtex_entry(work: dict, kind: str) -> str:
    fields = [("title", "{" + work["title"] + "}"),
              ("author", " and ".join(_names(work, bibtex=True))),
              ("year", _year(work))]
    if work.get("version"):
        fields.append(("version", str(work["version"])))
    url = work.get("repository-code") or work.get("url")
    if url:
        fields.append(("url", url))
    if work.get("journal"):
        fields.append(("journal", work["journal"]))
    if work.get("notes") or work.get("license"):
        fields.append(("note", work.get("notes") or f"License: {work['license']}"))
    body = ",\n".join(textwrap.fill(f"  {name} = {{{value}}}", width=80, subsequent_indent=" " * 4,
                                     break_long_words=False, break_on_hyphens=False)
                       for name, value in fields if value)  # lines that fit a printed page
    return f"@{kind}{{{_key(work)},\n{body}\n}}"


def bibtex(cff: dict) -> str:
    """BibTeX for the companion (@software) and each work the CFF lists as a reference."""
    entries = [_bibtex_entry(cff, "software" if cff.get("type", "software") == "software"
                             else "misc")]
    for ref in cff.get("references", []):
        kind = ref.get("type")
        if kind == "article" and not ref.get("journal"):
            kind = "misc"  # a preprint: BibTeX's @article needs a journal
        entries.append(_bibtex_entry(ref, kind if kind in {"article", "book", "software"}
                                     else "misc"))
    return "\n\n".join(entries) + "\n"


def reference_text(cff: dict) -> str:
    """The companion as one line, in the style of the CFF's own "cite as" text."""
    version = f" (version {cff['version']})" if cff.get("version") else ""
    url = cff.get("repository-code") or cff.get("url") or ""
    return (f"{' & '.join(_names(cff, bibtex=False))} ({_year(cff)}). {cff['title']}{version}"
            f" [Computer software]. {url}").strip()


# ------------------------------------------------------------------ stamp


def _git(root: Path, *args: str) -> str | None:
    try:
        done = subprocess.run(["git", "-C", str(root), *args], capture_output=True,
                              text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def build_stamp(root: Path = ROOT) -> dict:
    """{date, commit, commit_date, dirty}: commit is None outside a git checkout."""
    epoch = os.environ.get("SOURCE_DATE_EPOCH")
    when = (dt.datetime.fromtimestamp(int(epoch), dt.UTC) if epoch and epoch.isdigit()
            else dt.datetime.now(dt.UTC))
    commit = _git(root, "rev-parse", "HEAD")
    stamp = {"date": when.date().isoformat(), "commit": commit, "commit_date": None,
             "dirty": False}
    if commit:
        stamp["commit_date"] = _git(root, "log", "-1", "--format=%cs", commit)
        stamp["dirty"] = bool(_git(root, "status", "--porcelain", "--untracked-files=no"))
    return stamp


def stamp_text(stamp: dict) -> str:
    if not stamp["commit"]:
        return f"Built on {stamp['date']} outside a git checkout: no commit recorded."
    dirty = " with uncommitted changes" if stamp["dirty"] else ""
    return (f"Built on {stamp['date']} from commit {stamp['commit'][:7]} "
            f"({stamp['commit_date']}){dirty}.")


def stamp_html(stamp: dict, repository_url: str | None) -> str:
    text = html.escape(stamp_text(stamp))
    if stamp["commit"] and repository_url:
        short = stamp["commit"][:7]
        link = (f'<a href="{html.escape(repository_url.rstrip("/"))}/commit/{stamp["commit"]}">'
                f"{short}</a>")
        text = text.replace(f"commit {short}", f"commit {link}", 1)
    return f'<p class="companion-build-stamp">{text}</p>'


# ------------------------------------------------------------------ Sphinx


def _repository_url(app: Sphinx) -> str | None:
    return (app.config.html_theme_options or {}).get("repository_url")


def set_stamp(app: Sphinx, config) -> None:
    stamp = build_stamp(Path(app.srcdir))
    options = dict(config.html_theme_options or {})
    options["extra_footer"] = stamp_html(stamp, options.get("repository_url"))
    config.html_theme_options = options
    config.companion_stamp_text = stamp_text(stamp)


def stamp_title_page(app: Sphinx) -> None:
    """The PDF's title page gives the stamp where LaTeX puts the date."""
    if app.builder.name == "latex":
        app.builder.context["date"] = app.config.companion_stamp_text.rstrip(".")


class CiteSection(SphinxTransform):
    """The root page ends with "Cite this book". A transform, run before
    sphinx-jupyterbook-latex's (500) arranges the root page's sections for the PDF and
    before the page's table of contents is collected, so both treat it as the page's own."""

    default_priority = 400

    def apply(self, **kwargs) -> None:
        if self.env.docname == self.config.root_doc:
            add_cite_section(self.app, self.document)


def add_cite_section(app: Sphinx, doctree: nodes.document) -> None:
    docname = app.env.docname
    app.env.note_dependency(str(Path(app.srcdir) / CFF))
    cff = read_citation(Path(app.srcdir))
    section = nodes.section(ids=[CITE_SECTION], names=["cite this book"])
    section += nodes.title(text="Cite this book")
    section += nodes.paragraph(text=" ".join(cff.get("message", "").split()))
    reference = reference_text(cff)
    url = cff.get("repository-code") or cff.get("url")
    if url and reference.endswith(url):
        section += nodes.paragraph("", "", nodes.Text(reference[: -len(url)]),
                                   nodes.reference(url, url, refuri=url))
    else:
        section += nodes.paragraph(text=reference)
    up = "../" * docname.count("/")
    files = addnodes.only(expr="html")
    files += nodes.paragraph(
        "", "", nodes.Text("BibTeX, also as a file ("),
        nodes.reference(BIB, BIB, refuri=up + BIB),
        nodes.Text(", made from the citation file "),
        nodes.reference(CFF, CFF, refuri=up + CFF), nodes.Text("):"))
    section += files
    text = bibtex(cff)
    lines = text.count("\n") + 2
    section += nodes.raw("", rf"\needspace{{{lines}\baselineskip}}", format="latex")  # one page
    block = nodes.literal_block(text, text)  # rawsource == text: highlighted as BibTeX
    block["language"] = "bibtex"
    section += block
    page = next((n for n in doctree.children if isinstance(n, nodes.section)), doctree)
    page += section  # a section of the page, not a second page title


def add_cite_menu(app: Sphinx, pagename, templatename, context, doctree) -> None:
    buttons = context.get("header_buttons")
    if buttons is None:
        return
    pathto = context["pathto"]
    root = "" if pagename == app.config.root_doc else pathto(app.config.root_doc)
    entries = [
        ("Cite this book", f"{root}#{CITE_SECTION}", "fas fa-quote-left",
         "How to cite the book: the reference and its BibTeX", "cite-section-button"),
        ("BibTeX", pathto(BIB, 1), "fas fa-file-lines",
         "Download the BibTeX (cite.bib), made from CITATION.cff", "cite-bib-button"),
        (CFF, pathto(CFF, 1), "fas fa-file-lines",
         "Download the citation file (Citation File Format)", "cite-cff-button"),
    ]
    group = {
        "type": "group",
        "tooltip": "Cite this book",
        "icon": "fas fa-quote-left",
        "label": CITE_GROUP,
        "buttons": [{"type": "link", "text": text, "url": url, "icon": icon,
                     "tooltip": tip, "label": label}
                    for text, url, icon, tip, label in entries],
    }
    at = next((i + 1 for i, b in enumerate(buttons) if b.get("label") == "download-buttons"),
              len(buttons))
    buttons.insert(at, group)


def write_cite_files(app: Sphinx, exception) -> None:
    if exception is not None or app.builder.format != "html":
        return
    out = Path(app.outdir)
    shutil.copyfile(Path(app.srcdir) / CFF, out / CFF)
    (out / BIB).write_text(bibtex(read_citation(Path(app.srcdir))), encoding="utf-8")


def setup(app: Sphinx) -> dict:
    app.add_config_value("companion_stamp_text", "", "")  # set from git, never by hand
    app.connect("config-inited", set_stamp)
    app.connect("builder-inited", stamp_title_page)
    app.add_transform(CiteSection)
    # after sphinx-book-theme's header buttons (501) and pysource's .py entry (600)
    app.connect("html-page-context", add_cite_menu, priority=610)
    app.connect("build-finished", write_cite_files)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
