"""Fixes that keep the built pages free of browser console errors, and the site lean.

* sphinx-thebe (loaded by Jupyter Book 1.0.4) registers its configuration script twice, so
  every page declared ``const THEBE_JS_URL`` twice: "Identifier 'THEBE_JS_URL' has already
  been declared". Identical script tags are dropped here, keeping the first.
* pydata-sphinx-theme reads the colour mode from ``html_context["default_mode"]``, which
  Jupyter Book leaves empty ("Got invalid theme mode: . Resetting to auto."). It is set in
  ``_config.yml`` (``sphinx.config.html_context``); tests/book/test_browser.py checks both.
* The themes ship source maps (3.4 MB of ``*.map`` in ``_static``) that no reader needs:
  they are deleted after the build, with the ``sourceMappingURL`` comments that name them.
* pydata-sphinx-theme loads a 1.5 MB icon script (``_static/scripts/fontawesome.js``) on
  every page although its stylesheet draws the same icons from web fonts:
  ``book/_templates/static/webpack-macros.html`` leaves the script tag out, and the script
  is deleted from the built site here.
* Every image of a page's text loads lazily (``loading="lazy"``): a chapter's figures below
  the first screen, folded ones included, cost a reader nothing until they scroll to them.
"""

from __future__ import annotations

import re
from pathlib import Path

_MAP_COMMENT = re.compile(r"\n?/[/*]# sourceMappingURL=\S+?\.map(?: \*/)?[ \t]*(?=\n|$)")
_IMG = re.compile(r"<img(?![^>]*\bloading=)")
ICON_SCRIPT = "scripts/fontawesome.js"


def drop_duplicate_scripts(app, pagename, templatename, context, doctree) -> None:
    scripts = context.get("script_files")
    if not scripts:
        return
    seen = set()
    kept = []
    for script in scripts:
        attributes = getattr(script, "attributes", {}) or {}
        filename = getattr(script, "filename", str(script)) or ""  # None and "" alike
        key = (filename, tuple(sorted((k, str(v)) for k, v in attributes.items())))
        if key in seen:
            continue
        seen.add(key)
        kept.append(script)
    scripts[:] = kept


def lazy_images(app, pagename, templatename, context, doctree) -> None:
    if "body" in context:
        context["body"] = _IMG.sub('<img loading="lazy"', context["body"])


def drop_unused_assets(app, exception) -> None:
    if exception is not None or app.builder.format != "html":
        return
    static = Path(app.outdir) / "_static"
    (static / ICON_SCRIPT).unlink(missing_ok=True)
    for source_map in static.rglob("*.map"):
        source_map.unlink()
    for asset in [*static.rglob("*.js"), *static.rglob("*.css")]:
        text = asset.read_text(encoding="utf-8", errors="surrogateescape")
        stripped = _MAP_COMMENT.sub("", text)
        if stripped != text:
            asset.write_text(stripped, encoding="utf-8", errors="surrogateescape")


def setup(app) -> dict:
    # before 600: a handler that returns a template name ends emit_firstresult early
    app.connect("html-page-context", drop_duplicate_scripts, priority=550)
    app.connect("html-page-context", lazy_images)
    app.connect("build-finished", drop_unused_assets)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
