"""Offer each chapter's jupytext ``.py`` source as a download beside its ``.ipynb``.

Jupyter Book 1 (sphinx-book-theme) offers the page's own source, the executed ``.ipynb``.
The ``.py`` twin is excluded from Sphinx (``exclude_patterns``), so this extension

* copies ``notebooks/NN_topic.py`` to ``_build/html/_sources/notebooks/NN_topic.py`` and
* adds a ``.py`` entry to the page's download menu, right after the ``.ipynb`` one, and
* loads ``companion-downloads.js`` (in ``book/_static``), which gives the menu's ``.ipynb``
  and ``.py`` links the ``download`` attribute, so they save the file rather than open it.

A notebook page without its ``.py`` twin is a broken pair: the build warns (and ``-W`` fails).
"""

from __future__ import annotations

import shutil
from pathlib import Path

from sphinx.application import Sphinx
from sphinx.util import logging

logger = logging.getLogger(__name__)

DOWNLOAD_GROUP = "download-buttons"
PY_BUTTON_LABEL = "download-py-button"


def py_twin(app: Sphinx, docname: str) -> Path | None:
    """The ``.py`` twin of a notebook page, or None for pages that are not notebooks."""
    source = Path(app.env.doc2path(docname))
    if source.suffix != ".ipynb":
        return None
    return source.with_suffix(".py")


def add_py_button(app: Sphinx, pagename: str, templatename, context, doctree) -> None:
    if pagename not in app.env.found_docs:
        return
    twin = py_twin(app, pagename)
    if twin is None:
        return
    if not twin.is_file():
        logger.warning(
            "notebook page %s has no jupytext twin %s to offer as a download",
            pagename,
            twin.name,
            location=pagename,
        )
        return
    for button in context.get("header_buttons", []):
        if button.get("label") != DOWNLOAD_GROUP:
            continue
        entry = {
            "type": "link",
            "url": f"{context['pathto']('_sources', 1)}/{pagename}.py",
            "text": ".py",
            "tooltip": "Download the jupytext source (.py, percent format)",
            "icon": "fas fa-file-code",
            "label": PY_BUTTON_LABEL,
        }
        buttons = button["buttons"]
        position = next(
            (i + 1 for i, b in enumerate(buttons) if str(b.get("text")) == ".ipynb"),
            len(buttons),
        )
        buttons.insert(position, entry)
        return
    logger.warning("no download menu on %s to add the .py source to", pagename, location=pagename)


def copy_py_sources(app: Sphinx, exception: Exception | None) -> None:
    if exception is not None or app.builder.format != "html":
        return
    for docname in sorted(app.env.found_docs):
        twin = py_twin(app, docname)
        if twin is not None and twin.is_file():
            target = Path(app.outdir) / "_sources" / f"{docname}.py"
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(twin, target)


def setup(app: Sphinx) -> dict:
    # sphinx-book-theme builds the download menu at priority 501; run after it.
    app.connect("html-page-context", add_py_button, priority=600)
    app.connect("build-finished", copy_py_sources)
    # book/_static/companion-downloads.js: the menu's links save the file (download attribute)
    app.add_js_file("companion-downloads.js")
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
