"""The claims ledger: every claim of the paper -> chapter -> tests -> verdict.

One data source, ``book/claims.yml``, holds the closed vocabulary of verdicts (``verdicts``),
the labels of our own E2 protocols (``protocol_labels``) and the rows (``claims``). It feeds
every verdict the book shows, so no page can drift from it:

* ``{claims-ledger-counts}``, ``{claims-ledger}`` (``:section:`` paper, open or beyond) and
  ``{verdict-vocabulary}`` render the ledger page (book/ledger.md): the counts, one line per
  claim with its details folded, and what each verdict means;
* ``{claim-verdict}`id``` renders a claim's name and verdict, linked to its ledger row, in
  the chapters' key results, the index and the claims page;
* ``{rule-label}`refuted at convergence``` marks a label of our protocols in prose (it is
  not a verdict on the paper);
* ``tests/book/test_ledger.py`` and ``tests/book/test_verdict_scan.py`` read the same file.

A claim can only be *shown* as reproduced while every test that checks it exists: a claim
whose chapter or tests are missing is shown as ``pending`` whatever its row says, and the
build warns (``-W`` turns that into a failure). ``tests/book/test_ledger.py`` checks the same
with pytest's own collection.

Importable without Sphinx (the tests use the pure functions); Sphinx is imported in
``setup`` only.
"""

from __future__ import annotations

import ast
import functools
import re
from collections import Counter
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
DATA_FILE = "book/claims.yml"
REQUIRED_KEYS = ("id", "claim", "paper", "verdict")
OPTIONAL_KEYS = ("chapter", "tests", "ours", "note", "proof")
#: The ledger's sections: key, the heading book/ledger.md gives it, which verdicts go there.
SECTIONS = ("paper", "open", "beyond")


# ---------------------------------------------------------------- data


def load_ledger(root: Path = ROOT) -> dict:
    """``book/claims.yml``: the vocabulary, the protocol labels and the rows."""
    with open(Path(root) / DATA_FILE, encoding="utf-8") as f:
        data = yaml.safe_load(f)
    if not isinstance(data, dict) or not isinstance(data.get("claims"), list):
        raise ValueError(f"{DATA_FILE} must be a mapping with a list under 'claims'")
    for key, name in (("verdicts", "word"), ("protocol_labels", "label")):
        entries = data.get(key)
        if not isinstance(entries, list) or not all(
                isinstance(e, dict) and e.get(name) and e.get("means") for e in entries):
            raise ValueError(f"{DATA_FILE}: '{key}' must list mappings with '{name}' and "
                             "'means'")
    return data


def load_claims(root: Path = ROOT) -> list[dict]:
    """The ledger's rows, in order, as written in ``book/claims.yml``."""
    return load_ledger(root)["claims"]


_DATA = load_ledger(ROOT)
#: The closed vocabulary: verdict word -> what it means, in the order the ledger counts them.
VOCABULARY = {v["word"]: " ".join(v["means"].split()) for v in _DATA["verdicts"]}
VERDICTS = tuple(VOCABULARY)
#: The verdicts whose row must give our number or finding (``ours``).
NEEDS_OURS = tuple(v["word"] for v in _DATA["verdicts"] if v.get("needs_ours"))
#: Labels of our own E2 protocols (not verdicts on the paper) -> what they mean.
PROTOCOL_LABELS = {v["label"]: " ".join(v["means"].split()) for v in _DATA["protocol_labels"]}
del _DATA


def section_of(claim: dict) -> str:
    """The ledger section of a row: the questions the paper leaves open, the companion's own
    results, or (every other verdict) the paper's claims."""
    return {"open": "open", "beyond the paper": "beyond"}.get(claim.get("verdict"), "paper")


def slug(word: str) -> str:
    """A verdict word as a class name: "reproduced with our constant" -> reproduced-with-our-
    constant."""
    return re.sub(r"[^a-z0-9]+", "-", word.lower()).strip("-")


def toc_pages(root: Path) -> list[str]:
    """Docnames (path without suffix) of the files listed in ``_toc.yml``, in its order."""
    with open(Path(root) / "_toc.yml", encoding="utf-8") as f:
        toc = yaml.safe_load(f)
    names: list[str] = []

    def walk(node):
        if isinstance(node, dict):
            for key, value in node.items():
                if key in ("file", "root") and isinstance(value, str):
                    names.append(re.sub(r"\.(ipynb|md|rst)$", "", value))
                else:
                    walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    walk(toc)
    return names


def toc_docnames(root: Path) -> set[str]:
    """Docnames (path without suffix) of every file listed in ``_toc.yml``."""
    return set(toc_pages(root))


def split_nodeid(nodeid: str) -> tuple[str, list[str]]:
    """``tests/t.py::C::test_f[p]`` -> (``tests/t.py``, [``C``, ``test_f``])."""
    path, _, rest = nodeid.partition("::")
    if not rest:
        return path, []
    names = [re.sub(r"\[.*\]$", "", part) for part in rest.split("::")]
    return path, names


@functools.cache
def _definitions(file: Path, mtime: float) -> ast.Module:
    return ast.parse(file.read_text(encoding="utf-8"))


def node_exists_statically(root: Path, nodeid: str) -> bool:
    """Whether the file and the (class and) test function of a node id are defined.

    A cheap check for the book build; ``tests/book/test_ledger.py`` uses pytest's collection.
    """
    path, names = split_nodeid(nodeid)
    file = Path(root) / path
    if not path.startswith("tests/") or not file.is_file() or not names:
        return False
    scope = _definitions(file, file.stat().st_mtime).body
    for name in names:
        found = [
            node
            for node in scope
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
            and node.name == name
        ]
        if not found:
            return False
        scope = found[0].body if isinstance(found[0], ast.ClassDef) else []
    return True


def schema_problems(claims: list[dict]) -> list[str]:
    """Malformed rows: missing or unknown keys, unknown verdicts, duplicate ids."""
    problems = []
    seen = set()
    for i, claim in enumerate(claims):
        where = f"claim #{i + 1} ({claim.get('id', '?') if isinstance(claim, dict) else '?'})"
        if not isinstance(claim, dict):
            problems.append(f"{where}: not a mapping")
            continue
        for key in REQUIRED_KEYS:
            if not claim.get(key):
                problems.append(f"{where}: missing '{key}'")
        unknown = set(claim) - set(REQUIRED_KEYS) - set(OPTIONAL_KEYS)
        if unknown:
            problems.append(f"{where}: unknown keys {sorted(unknown)}")
        if claim.get("verdict") not in VERDICTS:
            problems.append(f"{where}: verdict {claim.get('verdict')!r} not one of {VERDICTS}")
        if claim.get("verdict") in NEEDS_OURS and not claim.get("ours"):
            problems.append(f"{where}: verdict {claim['verdict']!r} needs 'ours' (our number)")
        if claim.get("proof") is not None and not re.fullmatch(
            r"[a-z][a-z0-9-]*", str(claim["proof"])
        ):
            problems.append(f"{where}: 'proof' must be a prf label such as thm-rank-one")
        if not isinstance(claim.get("tests", []) or [], list):
            problems.append(f"{where}: 'tests' must be a list of pytest node ids")
        if claim.get("id") in seen:
            problems.append(f"{where}: duplicate id")
        seen.add(claim.get("id"))
    return problems


def unchecked_reasons(claim: dict, chapters: set[str], existing_tests) -> list[str]:
    """Why a claim's verdict is not backed: no tests, a missing test, a missing chapter.

    ``existing_tests`` is a predicate on node ids.
    """
    reasons = []
    tests = claim.get("tests") or []
    if not tests:
        reasons.append("no test named")
    reasons += [f"test missing: {t}" for t in tests if not existing_tests(t)]
    chapter = claim.get("chapter")
    if not chapter:
        reasons.append("no chapter named")
    elif chapter not in chapters:
        reasons.append(f"chapter not in _toc.yml: {chapter}")
    return reasons


def shown_verdict(claim: dict, chapters: set[str], existing_tests) -> str:
    """The verdict word the book shows: the row's, or ``pending`` while anything it rests on
    is missing (never better than what existing tests back)."""
    if claim["verdict"] == "pending" or unchecked_reasons(claim, chapters, existing_tests):
        return "pending"
    return claim["verdict"]


def counts(claims: list[dict], chapters: set[str], existing_tests) -> dict[str, Counter]:
    """Shown verdicts counted per section, {section: Counter(verdict)}."""
    out = {section: Counter() for section in SECTIONS}
    for claim in claims:
        out[section_of(claim)][shown_verdict(claim, chapters, existing_tests)] += 1
    return out


# ---------------------------------------------------------------- rendering


def inline(text) -> str:
    """One paragraph of MyST from a row's text: maths ($...$), roles and code spans pass as
    written; elsewhere the emphasis marks (β* is not italics) and what would open raw HTML
    are escaped."""
    parts = re.split(r"(\$[^$]+\$|\{[\w:-]+\}`[^`]+`|`[^`]+`)", " ".join(str(text).split()))
    return "".join(part if i % 2 else re.sub(r"([*_|]|<(?=[A-Za-z/!]))", r"\\\1", part)
                   for i, part in enumerate(parts))


def statement_link(claim: dict, chapters: set[str]) -> str:
    """The claim's name, linked to the box that states it (else to its chapter)."""
    name = " ".join(str(claim["claim"]).split()).replace("<", "‹")
    if claim.get("proof"):
        return f"{{prf:ref}}`{name} <{claim['proof']}>`"
    if claim.get("chapter") in chapters:
        return f"{{doc}}`{name} </{claim['chapter']}>`"
    return inline(name)


def render_section(claims: list[dict], section: str, chapters: set[str],
                   existing_tests) -> str:
    """One section of the ledger as MyST: per claim a fold whose one-line title is the claim
    (linked to its statement) and its verdict, the details inside."""
    blocks = []
    for claim in claims:
        if section_of(claim) != section:
            continue
        lines = [f"::::{{dropdown}} {statement_link(claim, chapters)} "
                 f"{{ledger-verdict}}`{claim['id']}`",
                 f":name: claim-{claim['id']}", ":class-container: ledger-row", "",
                 f"**The paper** (reported): {inline(claim['paper'])}", ""]
        if claim.get("ours"):
            lines += [f"**Ours:** {inline(claim['ours'])}", ""]
        if claim.get("note"):
            lines += [f"**Note:** {inline(claim['note'])}", ""]
        reasons = unchecked_reasons(claim, chapters, existing_tests)
        if reasons and claim["verdict"] != "pending":
            lines += ["**Shown as pending, unchecked:** " + inline("; ".join(reasons)), ""]
        where = []
        if claim.get("chapter") in chapters:
            where.append(f"**Chapter:** {{doc}}`/{claim['chapter']}`")
        if claim.get("proof"):
            where.append(f"**Stated in:** {{prf:ref}}`{claim['proof']}`")
        if where:
            lines += [" · ".join(where), ""]
        tests = claim.get("tests") or []
        if tests:
            lines += ["**Checked by:**", ""] + [f"- `{t}`" for t in tests] + [""]
        lines.append("::::")
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks) + "\n"


def render_markdown(claims: list[dict], chapters: set[str], existing_tests) -> str:
    """The whole ledger as MyST (the three sections under their headings), as the page
    renders it; for the tests."""
    return "\n".join(f"## {section}\n\n" + render_section(claims, section, chapters,
                                                         existing_tests)
                     for section in SECTIONS)


# ---------------------------------------------------------------- Sphinx


def setup(app):
    from docutils import nodes
    from docutils.parsers.rst import directives
    from docutils.statemachine import StringList
    from sphinx.util import logging
    from sphinx.util.docutils import SphinxDirective

    logger = logging.getLogger(__name__)

    def context(env):
        root = Path(env.srcdir)
        env.note_dependency(str(root / DATA_FILE))
        claims = load_claims(root)
        chapters = toc_docnames(root)
        return root, claims, chapters, lambda t: node_exists_statically(root, t)

    def chip(word: str, claim_id: str | None = None):
        """A verdict as the book shows it: its word, classed for the scan and the style."""
        classes = ["verdict", f"verdict--{slug(word)}"]
        if claim_id:
            classes.append(f"claim--{claim_id}")
        return nodes.inline(word, word, classes=classes)

    def parse(directive, text: str, classes: list[str]):
        container = nodes.container(classes=classes)
        directive.state.nested_parse(StringList(text.splitlines()), directive.content_offset,
                                     container)
        return [container]

    class ClaimsLedger(SphinxDirective):
        """One section of ``book/claims.yml`` (``:section:`` paper, open or beyond)."""

        has_content = False
        option_spec = {"section": lambda arg: directives.choice(arg, SECTIONS)}

        def run(self):
            root, claims, chapters, exists = context(self.env)
            section = self.options.get("section", "paper")
            if section == "paper":  # the data's problems, once per build of the page
                for problem in schema_problems(claims):
                    logger.warning("claims ledger: %s", problem, location=self.get_location())
            for claim in claims:
                if section_of(claim) != section:
                    continue
                for test in claim.get("tests") or []:
                    test_file = root / split_nodeid(test)[0]
                    if test_file.is_file():
                        self.env.note_dependency(str(test_file))
                if claim.get("verdict") != "pending":
                    for reason in unchecked_reasons(claim, chapters, exists):
                        logger.warning("claims ledger: %s is marked %r but %s",
                                       claim.get("id"), claim.get("verdict"), reason,
                                       location=self.get_location())
            return parse(self, render_section(claims, section, chapters, exists),
                         ["claims-ledger", f"claims-ledger-{section}"])

    class ClaimsLedgerCounts(SphinxDirective):
        """The verdict counts of each section, one line each, linked to the sections."""

        has_content = False
        option_spec = {"titles": directives.unchanged}

        def run(self):
            _, claims, chapters, exists = context(self.env)
            titles = dict(zip(SECTIONS, (self.options.get("titles") or "").split("|"),
                              strict=False))
            by_section = counts(claims, chapters, exists)
            strip = nodes.bullet_list(classes=["verdict-counts"])
            for section in SECTIONS:
                counted = by_section[section]
                item = nodes.paragraph()
                item += nodes.strong(text=f"{titles.get(section, section).strip()} "
                                          f"({sum(counted.values())}): ")
                for k, word in enumerate(w for w in VERDICTS if counted[w]):
                    if k:
                        item += nodes.Text(" · ")
                    item += nodes.inline(text=f"{counted[word]} ")
                    item += chip(word)
                strip += nodes.list_item("", item)
            return [strip]

    class VerdictVocabulary(SphinxDirective):
        """What each verdict means (and each protocol label), from ``book/claims.yml``."""

        has_content = False

        def run(self):
            context(self.env)
            out = []
            for entries, term_node in ((VOCABULARY, chip),
                                       (PROTOCOL_LABELS, lambda w: nodes.emphasis(
                                           w, w, classes=["rule-label"]))):
                dl = nodes.definition_list(classes=["verdict-vocabulary"])
                for word, means in entries.items():
                    term = nodes.term()
                    term += term_node(word)
                    body = nodes.definition()
                    body += nodes.paragraph(text=means)
                    dl += nodes.definition_list_item("", term, body)
                out.append(dl)
            intro = nodes.paragraph(text="Labels of our own E2 protocols, printed where their "
                                         "results are; none is a verdict on the paper:")
            return [out[0], intro, out[1]]

    def find_claim(inliner, rawtext, text, lineno):
        env = inliner.document.settings.env
        root, claims, chapters, exists = context(env)
        claim = next((c for c in claims if c.get("id") == text.strip()), None)
        if claim is None:
            message = inliner.reporter.error(
                f"no claim {text.strip()!r} in {DATA_FILE}", line=lineno)
            return env, None, None, ([inliner.problematic(rawtext, rawtext, message)],
                                     [message])
        return env, claim, shown_verdict(claim, chapters, exists), None

    def ledger_verdict_role(name, rawtext, text, lineno, inliner, options=None, content=None):
        """``{ledger-verdict}`id``` -> the claim's verdict chip (the ledger's own rows)."""
        _, claim, word, failed = find_claim(inliner, rawtext, text, lineno)
        return failed or ([chip(word, claim["id"])], [])

    def claim_verdict_role(name, rawtext, text, lineno, inliner, options=None, content=None):
        """``{claim-verdict}`thm-a``` -> "Theorem A: reproduced", the claim's name and the
        verdict the ledger shows, linked to its row of the ledger."""
        env, claim, word, failed = find_claim(inliner, rawtext, text, lineno)
        if failed:
            return failed
        name = " ".join(str(claim["claim"]).split())
        uri = env.app.builder.get_relative_uri(env.docname, "book/ledger")
        link = nodes.reference(rawtext, "", internal=True, refuri=f"{uri}#claim-{claim['id']}",
                               classes=["claim-verdict"])
        link += nodes.inline(text=f"{name}: ")
        link += nodes.strong("", "", chip(word, claim["id"]))
        return [link], []

    def rule_label_role(name, rawtext, text, lineno, inliner, options=None, content=None):
        """``{rule-label}`refuted at convergence``` -> the label, marked as our protocol's."""
        label = " ".join(text.split())
        if label not in PROTOCOL_LABELS:
            message = inliner.reporter.error(
                f"rule-label: {label!r} is not one of {DATA_FILE}'s protocol_labels",
                line=lineno)
            return [inliner.problematic(rawtext, rawtext, message)], [message]
        return [nodes.emphasis(rawtext, label, classes=["rule-label"])], []

    app.add_role("claim-verdict", claim_verdict_role)
    app.add_role("ledger-verdict", ledger_verdict_role)
    app.add_role("rule-label", rule_label_role)
    app.add_directive("claims-ledger", ClaimsLedger)
    app.add_directive("claims-ledger-counts", ClaimsLedgerCounts)
    app.add_directive("verdict-vocabulary", VerdictVocabulary)
    app.add_css_file("companion.css")  # book/_static: the ledger's rows and verdict chips
    return {"version": "2.0", "parallel_read_safe": True, "parallel_write_safe": True}
