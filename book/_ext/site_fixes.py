"""Two fixes that keep the built pages free of browser console errors.

* sphinx-thebe (loaded by Jupyter Book 1.0.4) registers its configuration script twice, so
  every page declared ``const THEBE_JS_URL`` twice: "Identifier 'THEBE_JS_URL' has already
  been declared". Identical script tags are dropped here, keeping the first.
* pydata-sphinx-theme reads the colour mode from ``html_context["default_mode"]``, which
  Jupyter Book leaves empty ("Got invalid theme mode: . Resetting to auto."). It is set in
  ``_config.yml`` (``sphinx.config.html_context``); tests/book/test_browser.py checks both.
"""

from __future__ import annotations


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


def setup(app) -> dict:
    # before 600: a handler that returns a template name ends emit_firstresult early
    app.connect("html-page-context", drop_duplicate_scripts, priority=550)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
