"""Proof boxes and every reference to them carry one set of names (issue 17).

sphinx-proof numbers boxes per kind across the whole book (Theorem 1, Lemma 2, ...), which
clashes with the paper's lettered results (Theorem A, Lemma B, ...). On every page this
renames each box's caption and the text of every ``{prf:ref}`` link to it:

* a result of the paper gets the paper's name (``PAPER_NAMES``: Theorem A to Theorem G);
* a result of the companion gets its chapter and its place among the chapter's own boxes
  (Lemma 3.2: the companion's second box in Chapter 3).

So a letter always means the paper and a number always means this book (book/notation.md).
The proof index page (``prf-prf``) lists the boxes by chapter under those names and their
titles, in the order of the chapters, instead of sphinx-proof's bare labels; a title's maths
is set as text there (``$\beta = 1$`` as β = 1), since that page loads no MathJax. The
figures drawn by scripts (``scripts/draw_headline.py``, ``scripts/draw_roadmap.py``) take
their theorem numbers from :func:`box_names` too.
The boxes are read from the chapter sources (``notebooks/NN_topic.py``, jupytext percent
format: a line ``# ```{prf:kind} title`` followed by ``# :label: name``).
"""

from __future__ import annotations

import re
from pathlib import Path

#: prf label -> the paper's name for the result (THEORY.md's lettering, our labels).
PAPER_NAMES = {
    "thm-rank-one": "Theorem A",
    "obs-no-zero-error": "Observation A′",
    "lem-gap-domination": "Lemma B",
    "lem-amplification": "Lemma C",
    "lem-trace-rank": "Lemma D",
    "lem-nonneg-sharpening": "Lemma D′",
    "thm-exponential-rank": "Theorem E",
    "prop-dense-softmax": "Proposition F",
    "thm-transcript": "Theorem G",
}

_BOX = re.compile(r"^# ```\{prf:(\w+)\}(.*)\n# :label: ([\w-]+)\s*$", re.MULTILINE)
_KINDS = "Theorem|Lemma|Proposition|Corollary|Observation|Definition|Remark|Conjecture|Example"


def _boxes(root: Path) -> list[tuple[int, str, str, str]]:
    """(chapter, label, displayed name, title) of every labelled box, in reading order."""
    boxes = []
    for source in sorted((Path(root) / "notebooks").glob("[0-9][0-9]_*.py")):
        chapter = int(source.name[:2])
        own = 0
        for kind, title, label in _BOX.findall(source.read_text(encoding="utf-8")):
            if kind == "proof":
                continue
            if label in PAPER_NAMES:
                name = PAPER_NAMES[label]
            else:
                own += 1
                name = f"{kind.capitalize()} {chapter}.{own}"
            boxes.append((chapter, label, name, title.strip()))
    return boxes


#: TeX commands of box titles, as text (plain_maths)
_TEX = {r"\beta": "β", r"\leq": "≤", r"\le": "≤", r"\geq": "≥", r"\ge": "≥",
        r"\varepsilon": "ε", r"\rho": "ρ", r"\lambda": "λ", r"\Omega": "Ω", r"\in": "∈",
        r"\cdot": "·", r"\to": "→", r"\infty": "∞", r"\times": "×", r"\ne": "≠",
        r"\alpha": "α", r"\varphi": "φ", r"\phi": "φ", r"\sum": "∑", r"\log": "log"}


def plain_maths(title: str) -> str:
    """A title's inline maths as text: "Below $\\beta = 1$" -> "Below β = 1". Raises
    ValueError on a command it does not know, so no raw TeX reaches a page."""

    def text(match):
        tex = match.group(1)
        for command in sorted(_TEX, key=len, reverse=True):
            tex = re.sub(re.escape(command) + r"(?![A-Za-z])", _TEX[command], tex)
        tex = re.sub(r"[{}]", "", tex)
        if "\\" in tex or "$" in tex:
            raise ValueError(f"plain_maths: cannot set {match.group(0)!r} as text")
        return tex

    return re.sub(r"\$([^$]+)\$", text, title)


def box_names(root: Path) -> dict[str, str]:
    """prf label -> displayed name, for every labelled box of every chapter source."""
    return {label: name for _, label, name, _ in _boxes(root)}


def proof_index(root: Path, entries) -> list[tuple[str, list[tuple]]]:
    """The proof index's groups, one per chapter ("3": its boxes in reading order), each
    entry named "Lemma 3.2: Trace bound"; ``entries`` are sphinx-proof's, whose anchor
    (the label) and page are kept. A label the sources do not name keeps its entry."""
    by_label = {entry[3]: entry for entry in entries}
    groups: dict[str, list[tuple]] = {}
    for chapter, label, name, title in _boxes(root):
        entry = by_label.pop(label, None)
        if entry is None:
            continue
        text = f"{name}: {plain_maths(title)}" if title else name
        groups.setdefault(str(chapter), []).append((text, 0, entry[2], label, "", "", ""))
    if by_label:
        groups["other"] = list(by_label.values())
    return list(groups.items())


def rename(html: str, names: dict[str, str]) -> str:
    """Box captions and reference texts of one page's body, renamed by ``names``."""

    def caption(match):
        name = names.get(match.group(2))
        return f"{match.group(1)}{name} {match.group(3)}" if name else match.group(0)

    def link(match):
        name = names.get(match.group(2))
        return f"{match.group(1)}{name}{match.group(3)}" if name else match.group(0)

    html = re.sub(
        r'(id="([\w-]+)">\s*<p class="admonition-title"><span class="caption-number">)'
        r"[^<]*(</span>)",
        caption,
        html,
    )
    return re.sub(
        rf'(<a class="reference internal" href="[^"]*#([\w-]+)">)(?:{_KINDS}) [0-9.]+(</a>)',
        link,
        html,
    )


def setup(app):
    state: dict[str, dict[str, str]] = {}

    def names() -> dict[str, str]:
        if "names" not in state:
            state["names"] = box_names(Path(app.srcdir))
        return state["names"]

    def on_page(app, pagename, templatename, context, doctree):
        if "body" in context:
            context["body"] = rename(context["body"], names())
        if pagename == "prf-prf" and context.get("content"):
            entries = [e for _, group in context["content"] for e in group]
            context["content"] = proof_index(Path(app.srcdir), entries)
            context["indextitle"] = "Proof index: every numbered statement, by chapter"

    app.connect("html-page-context", on_page)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
