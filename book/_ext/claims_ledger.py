"""The claims ledger: every claim of the paper -> chapter -> tests -> verdict.

One data source, ``book/claims.yml``, feeds both the book page (the ``claims-ledger``
directive renders it at build time, so the page cannot drift from the data) and
``tests/book/test_ledger.py``.

A claim can only be *shown* as reproduced while every test that checks it exists: the
renderer downgrades any claim whose chapter or tests are missing to ``pending (unchecked:
...)`` and the build warns (``-W`` turns that into a failure). ``tests/book/test_ledger.py`` checks
the same with pytest's own collection.

Importable without Sphinx (the tests use the pure functions); Sphinx is imported in
``setup`` only.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import yaml

DATA_FILE = "book/claims.yml"
VERDICTS = ("reproduced", "reproduced with our constant", "reproduced with our sizes",
            "shape reproduced on another family", "differs", "pending",
            "open question — probed")
NEEDS_OURS = ("reproduced with our constant", "reproduced with our sizes",
              "shape reproduced on another family", "differs", "open question — probed")
REQUIRED_KEYS = ("id", "claim", "paper", "verdict")
OPTIONAL_KEYS = ("chapter", "tests", "ours", "note", "proof")


# ---------------------------------------------------------------- data


def load_claims(root: Path) -> list[dict]:
    """The ledger's rows, in order, as written in ``book/claims.yml``."""
    with open(Path(root) / DATA_FILE, encoding="utf-8") as f:
        data = yaml.safe_load(f)
    if not isinstance(data, dict) or not isinstance(data.get("claims"), list):
        raise ValueError(f"{DATA_FILE} must be a mapping with a list under 'claims'")
    return data["claims"]


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


def node_exists_statically(root: Path, nodeid: str) -> bool:
    """Whether the file and the (class and) test function of a node id are defined.

    A cheap check for the book build; ``tests/book/test_ledger.py`` uses pytest's collection.
    """
    path, names = split_nodeid(nodeid)
    file = Path(root) / path
    if not path.startswith("tests/") or not file.is_file() or not names:
        return False
    scope = ast.parse(file.read_text(encoding="utf-8")).body
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
    """The verdict the page shows: never better than what existing tests back."""
    verdict = claim["verdict"]
    if verdict == "pending":
        return "pending"
    reasons = unchecked_reasons(claim, chapters, existing_tests)
    if reasons:
        return "pending (unchecked: " + "; ".join(reasons) + ")"
    if verdict in NEEDS_OURS:
        return f"{verdict}: {claim['ours']}"
    return verdict


def render_markdown(claims: list[dict], chapters: set[str], existing_tests) -> str:
    """The ledger as a MyST markdown table (chapters as ``{doc}`` links)."""

    def cell(text) -> str:
        # one line of MyST: maths in $...$ typesets and roles work (a role's `content`, e.g.
        # a glued value's path::key, is kept as written); elsewhere the emphasis marks (β* is
        # not italics), the table's separator and what would open raw HTML are escaped;
        # maths writes \lvert, not |
        parts = re.split(r"(\$[^$]+\$|`[^`]*`)", " ".join(str(text).split()))
        return "".join((part if part.startswith("`") else part.replace("|", "\\|"))
                       if i % 2 else re.sub(r"([*_|]|<(?=[A-Za-z/!]))", r"\\\1", part)
                       for i, part in enumerate(parts))

    lines = [
        "| Claim | Verdict | The paper says (reported) | Chapter | Checked by |",
        "|---|---|---|---|---|",
    ]
    for claim in claims:
        chapter = claim.get("chapter")
        chapter_cell = f"{{doc}}`/{chapter}`" if chapter and chapter in chapters else "—"
        tests = claim.get("tests") or []
        tests_cell = "<br>".join(f"`{t}`" for t in tests) if tests else "—"
        verdict = shown_verdict(claim, chapters, existing_tests)
        # the note qualifies the verdict, so it is printed under it
        verdict_cell = f"**{cell(verdict)}**"
        if claim.get("note"):
            verdict_cell += f"<br>*Note:* {cell(claim['note'])}"
        # the proof box that states the claim in this book (a prf label in a chapter)
        proof_cell = f"<br>{{prf:ref}}`{claim['proof']}`" if claim.get("proof") else ""
        lines.append(
            f"| **{cell(claim['claim'])}** (`{claim['id']}`){proof_cell} | {verdict_cell} "
            f"| {cell(claim['paper'])} | {chapter_cell} | {tests_cell} |"
        )
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------- Sphinx


def setup(app):
    from docutils import nodes
    from docutils.statemachine import StringList
    from sphinx.util import logging
    from sphinx.util.docutils import SphinxDirective

    logger = logging.getLogger(__name__)

    class ClaimsLedger(SphinxDirective):
        """Render ``book/claims.yml`` as the ledger table."""

        has_content = False

        def run(self):
            root = Path(self.env.srcdir)
            claims = load_claims(root)
            self.env.note_dependency(str(root / DATA_FILE))
            chapters = toc_docnames(root)
            for problem in schema_problems(claims):
                logger.warning("claims ledger: %s", problem, location=self.get_location())
            for claim in claims:
                for test in claim.get("tests") or []:
                    test_file = root / split_nodeid(test)[0]
                    if test_file.is_file():
                        self.env.note_dependency(str(test_file))
                if claim.get("verdict") != "pending":
                    for reason in unchecked_reasons(
                        claim, chapters, lambda t: node_exists_statically(root, t)
                    ):
                        logger.warning(
                            "claims ledger: %s is marked %r but %s",
                            claim.get("id"),
                            claim.get("verdict"),
                            reason,
                            location=self.get_location(),
                        )
            text = render_markdown(claims, chapters, lambda t: node_exists_statically(root, t))
            container = nodes.container(classes=["claims-ledger"])
            self.state.nested_parse(StringList(text.splitlines()), self.content_offset, container)
            return [container]

    def claim_verdict_role(name, rawtext, text, lineno, inliner, options=None, content=None):
        """``{claim-verdict}`thm-a``` -> the verdict the ledger shows for that claim (its
        first words: reproduced / reproduced with our constant / differs / pending)."""
        env = inliner.document.settings.env
        root = Path(env.srcdir)
        env.note_dependency(str(root / DATA_FILE))
        claims = {c.get("id"): c for c in load_claims(root)}
        claim = claims.get(text.strip())
        if claim is None:
            message = inliner.reporter.error(
                f"claim-verdict: no claim {text!r} in {DATA_FILE}", line=lineno
            )
            return [inliner.problematic(rawtext, rawtext, message)], [message]
        shown = shown_verdict(
            claim, toc_docnames(root), lambda t: node_exists_statically(root, t)
        )
        short = "pending" if shown.startswith("pending") else shown.split(":")[0]
        return [nodes.strong(rawtext, f"verdict: {short}", classes=["claim-verdict"])], []

    app.add_role("claim-verdict", claim_verdict_role)
    app.add_directive("claims-ledger", ClaimsLedger)
    app.add_css_file("companion.css")  # book/_static: column widths of the ledger table
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
