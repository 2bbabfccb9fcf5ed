"""Launch paths point at one repository: `repository` (url, branch) in _config.yml. The
launch buttons are computed here by the very code of jupyter-book and sphinx-book-theme that
builds them; CITATION.cff and the install cell must agree; the Pages workflow refuses to
deploy when repository.url is not the repository it runs in (scripts/check_repository.py)."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))
import check_repository  # noqa: E402
import update_install_cell  # noqa: E402

CONFIG = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))
URL, BRANCH = CONFIG["repository"]["url"].rstrip("/"), CONFIG["repository"]["branch"]
WORKFLOW = ROOT / ".github" / "workflows" / "book.yml"
CHAPTER = "notebooks/01_rank_one"


def launch_buttons(pagename: str) -> dict[str, str]:
    """{button text: url} of a notebook page, from _config.yml through jupyter-book's config
    translation and sphinx-book-theme's launch-button code (what `jupyter-book build` runs)."""
    pytest.importorskip("jupyter_book")  # the book extra
    from jupyter_book.config import get_final_config
    from sphinx_book_theme.header_buttons import update_context_with_repository_info
    from sphinx_book_theme.header_buttons.launch import add_launch_buttons

    class Config(SimpleNamespace):  # Sphinx's config is read both as app.config[k] and .k
        def __getitem__(self, key):
            return getattr(self, key)

    sphinx_config, _ = get_final_config(user_yaml=ROOT / "_config.yml", sourcedir=ROOT,
                                        cli_config={"latex_individualpages": False})
    theme_options = sphinx_config["html_theme_options"]
    app = SimpleNamespace(
        config=Config(html_theme_options=theme_options, html_context={}),
        builder=None,
        env=SimpleNamespace(doc2path=lambda name: str(ROOT / f"{name}.ipynb"),
                            metadata={pagename: {"kernelspec": {"name": "python3"}}}),
    )
    update_context_with_repository_info(app)
    context = {"pagename": pagename, "header_buttons": [], "sourcename": f"{pagename}.ipynb",
               **app.config.html_context}
    add_launch_buttons(app, pagename, "page.html", context, None)
    (group,) = context["header_buttons"]
    return {button["text"]: button["url"] for button in group["buttons"]}


def test_repository_url_is_a_github_repository():
    assert re.fullmatch(r"https://github\.com/[\w.-]+/[\w.-]+", URL), URL
    assert CONFIG["repository"]["path_to_book"] == "", "the book is the repository root"


def test_launch_buttons_open_the_chapter_in_this_repository():
    owner_repo = URL.removeprefix("https://github.com/")
    buttons = launch_buttons(CHAPTER)
    assert buttons == {
        "Binder": f"https://mybinder.org/v2/gh/{owner_repo}/{BRANCH}"
                  f"?urlpath=lab/tree/{CHAPTER}.ipynb",
        "Colab": f"https://colab.research.google.com/github/{owner_repo}/blob/{BRANCH}/"
                 f"{CHAPTER}.ipynb",
    }
    assert (ROOT / f"{CHAPTER}.ipynb").is_file()


def test_citation_and_install_cell_derive_from_repository_url():
    citation = yaml.safe_load((ROOT / "CITATION.cff").read_text(encoding="utf-8"))
    assert citation["repository-code"] == URL
    assert update_install_cell.repository() == (URL, BRANCH)
    assert f'"companion @ git+{URL}@{BRANCH}"' in update_install_cell.cell_source()


def test_no_other_file_names_a_repository_url():
    """Everything else derives from repository.url: no second copy to forget."""
    allowed = {"_config.yml", "CITATION.cff"}
    files = subprocess.run(["git", "-C", str(ROOT), "ls-files"], check=True,
                           capture_output=True, text=True).stdout.split()
    offenders = [
        name for name in files
        if name not in allowed and not name.startswith("notebooks/")  # generated cells
        and (ROOT / name).is_file() and (ROOT / name).suffix in {".py", ".md", ".yml", ".toml",
                                                                   ".cff", ".sh", ".txt"}
        and URL.lower() in (ROOT / name).read_text(encoding="utf-8", errors="ignore").lower()
    ]
    assert not offenders, f"these files repeat repository.url {URL}: {offenders}"


def test_built_pages_carry_the_same_launch_buttons():
    page = ROOT / "_build" / "html" / f"{CHAPTER}.html"
    if not page.exists():
        pytest.skip("the book is not built (bash scripts/build_book.sh)")
    html = page.read_text(encoding="utf-8")
    for url in launch_buttons(CHAPTER).values():
        assert f'href="{url.replace("&", "&amp;")}"' in html, url


@pytest.mark.parametrize(("url", "branch", "fine"), [
    (URL, BRANCH, True),
    (URL.upper() + "/", BRANCH, True),  # GitHub names are case-insensitive
    ("https://github.com/someone/fork", BRANCH, False),
    (URL, "gh-pages", False),
])
def test_the_deploy_check_refuses_another_repository(url, branch, fine):
    assert (check_repository.problems(url, branch) == []) is fine


@pytest.mark.parametrize("placeholder", [
    "https://github.com/OWNER/REPO", "https://github.com/<owner>/<repo>",
    "https://github.com/your-name/companion", "https://example.com/x/y",
    "https://github.com/${{ github.repository }}",
])
def test_the_deploy_check_refuses_a_placeholder(tmp_path, placeholder):
    (tmp_path / "_config.yml").write_text(
        f"title: x\nrepository:\n  url: {placeholder}\n  branch: main\nhtml:\n  x: 1\n")
    (tmp_path / "CITATION.cff").write_text(f'repository-code: "{placeholder}"\n')
    found = check_repository.problems(placeholder, "main", root=tmp_path)
    assert found and "placeholder" in found[0]


def test_the_deploy_check_reads_this_config_and_citation():
    assert check_repository.top_level_value(
        (ROOT / "_config.yml").read_text(encoding="utf-8"), "repository", "url") == URL
    assert check_repository.top_level_value(
        (ROOT / "_config.yml").read_text(encoding="utf-8"), "repository", "branch") == BRANCH
    run = subprocess.run([sys.executable, str(ROOT / "scripts" / "check_repository.py"),
                          "https://github.com/someone/fork", BRANCH],
                         capture_output=True, text=True)
    assert run.returncode == 1 and "repository.url" in run.stderr


def test_the_workflow_checks_the_url_before_building_and_deploying():
    workflow = yaml.safe_load(WORKFLOW.read_text(encoding="utf-8"))
    jobs = workflow["jobs"]
    steps = jobs["build"]["steps"]
    check = next(i for i, s in enumerate(steps) if "check_repository.py" in s.get("run", ""))
    assert shlex.split(steps[check]["run"])[-2:] == [
        "https://github.com/${{ github.repository }}", "${{ github.ref_name }}"]
    assert steps[check]["if"] == jobs["deploy"]["if"], "checked whenever a deploy follows"
    first_run = next(i for i, s in enumerate(steps) if "run" in s)
    assert check == first_run, "the check must run before anything is installed or built"
    assert "build" in jobs["deploy"]["needs"] and "py313" in jobs["deploy"]["needs"]


# The newest major of each action, read from the actions' own repositories (tags) in 2026-11.
CURRENT_MAJORS = {"actions/checkout": 7, "actions/upload-artifact": 7,
                  "actions/upload-pages-artifact": 5, "actions/deploy-pages": 5}


def test_actions_are_at_current_majors():
    used = re.findall(r"uses:\s*([\w-]+/[\w-]+)@v(\d+)", WORKFLOW.read_text(encoding="utf-8"))
    assert used, "no actions found"
    for action, major in used:
        assert action in CURRENT_MAJORS, f"{action}: add its current major to CURRENT_MAJORS"
        assert int(major) >= CURRENT_MAJORS[action], f"{action}@v{major} is behind"
