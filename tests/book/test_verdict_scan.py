"""One voice: a scan of the built book (_build/html) for verdict words (issue 35).

Every verdict the book shows is generated from book/claims.yml: the ledger's rows and counts,
the chips of the key results, the index and the claims page ({claim-verdict}), each a
``span.verdict`` that names its claim (``claim--<id>``). The scan parses every page of the
table of contents with the standard library's HTML parser and fails on

* a generated verdict whose word is not in the vocabulary, or differs from the verdict the
  ledger shows for its claim, and on ledger counts that are not the rows';
* in the prose (outside generated verdicts, labels marked as our protocols' with
  ``{rule-label}``, code, maths and computed cell outputs): a verdict word outside the
  vocabulary ("refuted", "shape reproduced", "probed", ...), a phrase of the vocabulary
  typed by hand ("not reproduced", "beyond the paper", ...), a typed word in a verdict's
  place ("verdict: differs", a word of either set set in bold), or "trained to convergence";
* in computed outputs: a verdict-like word that is not one of our protocols' labels;
* anywhere in a page's text: a numbered statement ("Lemma 3.9", "Cor. 3.10") that is not the
  name of a box of that number (book/_ext/paper_names.py numbers them; a typed number drifts).

The pre-registration page defines those labels, so there they may stand in the prose. The
README is scanned as text for the same words. Without a built book the test skips, except in
CI (env var CI set), where it fails. Run it after `bash scripts/build_book.sh`.
"""

from __future__ import annotations

import os
import re
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SITE = ROOT / "_build" / "html"
sys.path.insert(0, str(ROOT / "book" / "_ext"))
import claims_ledger as ledger  # noqa: E402
import paper_names  # noqa: E402

#: The page where our protocols' labels are defined (they may stand in its prose).
PROTOCOL_PAGE = "book/e2_preregistration"
#: Verdict words outside the vocabulary: earlier words of this book and what a reader
#: would take for a verdict on the paper.
FOREIGN = (r"refuted", r"refutes", r"shape reproduced", r"reproduced with our sizes",
           r"open question\s*[—-]\s*probed", r"probed", r"inconclusive",
           r"partly reproduced", r"partially reproduced")
#: Vocabulary phrases that are only ever verdicts: typed by hand, they bypass the ledger.
TYPED = tuple(w for w in ledger.VERDICTS if " " in w)
#: Words that, set in bold or after "verdict:", read as a verdict.
VERDICT_LIKE = tuple(ledger.VERDICTS) + tuple(ledger.PROTOCOL_LABELS) + (
    "refuted", "shape reproduced on another family", "open question — probed", "confirmed")
OVERCLAIMS = (r"trained to convergence",)
VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source",
        "track", "wbr"}
#: Elements whose text is not prose: code, maths (TeX source), scripts.
NOT_PROSE = {"script", "style", "pre", "code", "svg", "math", "mjx-container", "template"}


class Node:
    def __init__(self, tag: str, attrs: dict, parent: Node | None):
        self.tag, self.attrs, self.parent, self.children = tag, attrs, parent, []

    @property
    def classes(self) -> list[str]:
        return (self.attrs.get("class") or "").split()

    def text(self) -> str:
        return "".join(c if isinstance(c, str) else c.text() for c in self.children)

    def iter(self):
        yield self
        for c in self.children:
            if isinstance(c, Node):
                yield from c.iter()


class _Tree(HTMLParser):
    """A page as a tree of Nodes (tolerant: a stray end tag closes up to its opener)."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.root = Node("#root", {}, None)
        self.open = self.root

    def handle_starttag(self, tag, attrs):
        node = Node(tag, dict(attrs), self.open)
        self.open.children.append(node)
        if tag not in VOID:
            self.open = node

    def handle_endtag(self, tag):
        node = self.open
        while node is not self.root and node.tag != tag:
            node = node.parent
        if node is not self.root:
            self.open = node.parent

    def handle_data(self, data):
        self.open.children.append(data)


def parse(html: str) -> Node:
    tree = _Tree()
    tree.feed(html)
    tree.close()
    return tree.root


def _article(root: Node) -> Node:
    """The page's own content (not the navigation, which repeats titles)."""
    for node in root.iter():
        if node.tag == "article" or "bd-article" in node.classes:
            return node
    return root


def _prose(node: Node, out: list[str]) -> None:
    """The text of a node outside generated verdicts, protocol labels, code, maths and
    computed outputs, with block boundaries kept apart."""
    for c in node.children:
        if isinstance(c, str):
            out.append(c)
            continue
        skip = (c.tag in NOT_PROSE or {"verdict", "rule-label", "cell_output", "math",
                                       "MathJax", "highlight"} & set(c.classes))
        if not skip:
            _prose(c, out)
        out.append(" ")


def _words(pattern: str) -> re.Pattern:
    return re.compile(rf"(?<![\w-]){pattern}(?![\w-])", re.IGNORECASE)


def _sentence(text: str, match: re.Match) -> str:
    return " ".join(text[max(0, match.start() - 70):match.end() + 30].split())


def prose_problems(text: str, labels_allowed: bool = False) -> list[str]:
    """Verdict words typed in prose (see the module docstring)."""
    text = " ".join(text.split())
    allowed = {w.lower() for w in ledger.PROTOCOL_LABELS} if labels_allowed else set()
    problems = []
    for pattern in FOREIGN + OVERCLAIMS:
        for m in _words(pattern).finditer(text):
            if any(m.group(0).lower() in a for a in allowed) and re.match(
                    "|".join(map(re.escape, allowed)), text[m.start():], re.IGNORECASE):
                continue
            problems.append(f"{m.group(0)!r} in prose: …{_sentence(text, m)}…")
    for phrase in TYPED:
        if labels_allowed and phrase in allowed:
            continue
        for m in _words(re.escape(phrase)).finditer(text):
            problems.append(f"{m.group(0)!r} typed, not generated: …{_sentence(text, m)}…")
    words = "|".join(re.escape(w) for w in sorted(VERDICT_LIKE, key=len, reverse=True))
    for m in re.finditer(rf"\bverdicts?\b\s*(?:[:—–]|is|was)?\s*\**\s*({words})(?![\w-])",
                         text, re.IGNORECASE):
        if not (labels_allowed and m.group(1).lower() in allowed):
            problems.append(f"verdict typed: …{_sentence(text, m)}…")
    return problems


def bold_problems(article: Node, labels_allowed: bool) -> list[str]:
    """A verdict-like word set in bold by hand (generated chips are not bold elements). Bold
    "Open" is chapter 8's mark of a finding that is neither proved nor measured, the sense
    the vocabulary gives "open", so it is not counted."""
    allowed = {w.lower() for w in ledger.PROTOCOL_LABELS} if labels_allowed else set()
    words = {w.lower() for w in VERDICT_LIKE} - {"open"}
    out = []
    for node in article.iter():
        if node.tag in ("strong", "b") and not any(
                isinstance(c, Node) and "verdict" in c.classes for c in node.iter()):
            text = re.sub(r"[\s.:;,]+$", "", " ".join(node.text().split())).lower()
            if text in words and text not in allowed:
                out.append(f"bold verdict word typed: {text!r}")
    return out


def output_problems(article: Node) -> list[str]:
    """Computed outputs print our protocols' labels (the rules' results), nothing else."""
    out = []
    labels = "|".join(re.escape(w) for w in ledger.PROTOCOL_LABELS)
    for node in article.iter():
        if "cell_output" not in node.classes:
            continue
        text = " ".join(node.text().split())
        for pattern in FOREIGN:
            for m in _words(pattern).finditer(text):
                if not re.match(labels, text[m.start():], re.IGNORECASE):
                    out.append(f"output prints {m.group(0)!r}: …{_sentence(text, m)}…")
    return out


_NUMBERED = re.compile(r"\b(Theorem|Lemma|Proposition|Corollary|Definition|Example|Observation|"
                       r"Remark|Cor\.|Prop\.|Def\.)\s+(\d+\.\d+)\b")
_ABBREVIATED = {"Cor.": "Corollary", "Prop.": "Proposition", "Def.": "Definition"}


def number_problems(text: str, names: set[str]) -> list[str]:
    """Numbered statements named as the proof boxes are: "Lemma 3.11" only if box 3.11 of
    chapter 3 is a lemma."""
    out = []
    for m in _NUMBERED.finditer(" ".join(text.split())):
        name = f"{_ABBREVIATED.get(m.group(1), m.group(1))} {m.group(2)}"
        if name not in names:
            out.append(f"{m.group(0)!r} names no box (the boxes: "
                       f"{sorted(n for n in names if n.endswith(' ' + m.group(2)))})")
    return out


def chip_problems(article: Node, shown: dict[str, str]) -> list[str]:
    """Generated verdicts: in the vocabulary and equal to the ledger's for their claim."""
    out = []
    for node in article.iter():
        if "verdict" not in node.classes:
            continue
        word = " ".join(node.text().split())
        if word not in ledger.VOCABULARY:
            out.append(f"verdict {word!r} is not in the vocabulary")
        claims = [c[len("claim--"):] for c in node.classes if c.startswith("claim--")]
        for claim in claims:
            if claim not in shown:
                out.append(f"verdict of an unknown claim {claim!r}")
            elif shown[claim] != word:
                out.append(f"{claim}: the page says {word!r}, the ledger {shown[claim]!r}")
        if f"verdict--{ledger.slug(word)}" not in node.classes:
            out.append(f"verdict {word!r} styled as another ({node.classes})")
    return out


def count_problems(article: Node, counts: dict) -> list[str]:
    """The ledger's count strip says how many rows of each section show each verdict."""
    out, strips = [], [n for n in article.iter() if "verdict-counts" in n.classes]
    if len(strips) != 1:
        return [f"{len(strips)} verdict-count strips on the ledger page"]
    items = [n for n in strips[0].iter() if n.tag == "li"]
    for item, section in zip(items, ledger.SECTIONS, strict=True):
        text = " ".join(item.text().split())
        want = counts[section]
        total = re.search(r"\((\d+)\):", text)
        if not total or int(total.group(1)) != sum(want.values()):
            out.append(f"{section}: count strip {text!r}, rows {dict(want)}")
        for word, n in want.items():
            if not re.search(rf"(?<!\d){n} {re.escape(word)}(?![\w ]*\d* ?{re.escape(word)})",
                             text):
                out.append(f"{section}: strip {text!r} lacks {n} {word}")
    return out


def scan(site: Path) -> list[str]:
    """Every problem of the built book at ``site``, "page: problem"."""
    chapters = ledger.toc_docnames(ROOT)
    claims = ledger.load_claims(ROOT)
    exists = lambda t: ledger.node_exists_statically(ROOT, t)  # noqa: E731
    shown = {c["id"]: ledger.shown_verdict(c, chapters, exists) for c in claims}
    names = set(paper_names.box_names(ROOT).values())
    problems = []
    chips = 0
    for doc in ledger.toc_pages(ROOT):
        page = site / f"{doc}.html"
        if not page.is_file():
            problems.append(f"{doc}: not built")
            continue
        article = _article(parse(page.read_text(encoding="utf-8")))
        labels_allowed = doc == PROTOCOL_PAGE
        found = chip_problems(article, shown)
        chips += sum("verdict" in n.classes for n in article.iter())
        text: list[str] = []
        _prose(article, text)
        found += prose_problems("".join(text), labels_allowed)
        found += bold_problems(article, labels_allowed)
        found += output_problems(article)
        found += number_problems(article.text(), names)
        if doc == "book/ledger":
            found += count_problems(article, ledger.counts(claims, chapters, exists))
            rows = {n.attrs.get("id") for n in article.iter() if "ledger-row" in n.classes}
            missing = {f"claim-{c['id']}" for c in claims} - rows
            if missing:
                found.append(f"ledger rows missing: {sorted(missing)}")
        problems += [f"{doc}: {p}" for p in found]
    if chips < len(claims):
        problems.append(f"only {chips} generated verdicts in the whole book")
    return problems


def _built() -> Path:
    if not (SITE / "index.html").is_file():
        if os.environ.get("CI"):
            pytest.fail(f"no built book at {SITE}; CI is set, so the scan must run")
        pytest.skip(f"no built book at {SITE} (run scripts/build_book.sh first)")
    return SITE


def test_every_verdict_in_the_built_book_is_the_ledgers():
    problems = scan(_built())
    assert not problems, f"{len(problems)} problems:\n" + "\n".join(problems)


def test_the_readme_types_no_verdict():
    problems = prose_problems((ROOT / "README.md").read_text(encoding="utf-8"))
    assert not problems, "\n".join(problems)


def test_the_scan_finds_what_it_looks_for():
    """Each check fires on a page that breaks it, so a clean scan means something."""
    html = """<html><body><nav>not reproduced</nav><article class="bd-article">
      <p>The study is refuted; the bound is not reproduced here. Verdict: differs.
      <strong>reproduced</strong> and heads were trained to convergence.</p>
      <p>Labelled: <em class="rule-label">refuted at convergence</em>,
      <code>refuted</code>, <span class="math">reproduced with our sizes</span>.</p>
      <span class="verdict verdict--reproduced claim--thm-e">reproduced</span>
      <span class="verdict verdict--proven">proven</span>
      <div class="cell_output"><p>refuted at convergence; shape reproduced</p></div>
    </article></body></html>"""
    article = _article(parse(html))
    text: list[str] = []
    _prose(article, text)
    prose = prose_problems("".join(text))
    assert len(prose) == 4 and any("'refuted'" in p for p in prose), prose  # not the labelled
    assert any("not reproduced" in p for p in prose) and any("Verdict: differs" in p
                                                             for p in prose)
    assert any("trained to convergence" in p for p in prose)
    assert bold_problems(article, False) == ["bold verdict word typed: 'reproduced'"]
    chips = chip_problems(article, {"thm-e": "reproduced with our constant"})
    assert any("thm-e: the page says 'reproduced'" in c for c in chips)
    assert any("'proven' is not in the vocabulary" in c for c in chips)
    outputs = output_problems(article)
    assert len(outputs) == 1 and "shape reproduced" in outputs[0]
    assert number_problems("Lemma 3.11 and Cor. 3.12 hold; Lemma 3.9 and Cor. 3.10 do not",
                           {"Lemma 3.11", "Corollary 3.12", "Proposition 3.9"}) == [
        "'Lemma 3.9' names no box (the boxes: ['Proposition 3.9'])",
        "'Cor. 3.10' names no box (the boxes: [])"]
    # on the protocol's own page its labels may stand in the prose
    assert prose_problems("registered: refuted at convergence, inconclusive.", True) == []
    assert prose_problems("registered: refuted at convergence.", False)
    assert prose_problems("a difference is a verdict *differs* in the ledger")
