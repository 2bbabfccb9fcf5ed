"""One lock for every reader's path: pyproject.toml ranges, constraints.txt pins,
environment.yml (Binder), the pre-commit hooks, the Pages workflow and the vendored MathJax
must agree. Each test fails on a disagreement and says which file to fix."""

from __future__ import annotations

import hashlib
import importlib.metadata
import re
import tomllib
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[2]

MATHJAX = ROOT / "book" / "_static" / "mathjax"
MATHJAX_VERSION = "3.2.2"
# the sha256 of MATHJAX / "SHA256SUMS"
MATHJAX_SUMS_SHA256 = "627f45df64093d3fae77ca7f1093547e3eb4ab5f39847fafb26120b26773658c"


def parse_lock(text: str) -> dict[str, Version]:
    pins: dict[str, Version] = {}
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        match = re.fullmatch(r"([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;]+)", line)
        if match is None:
            raise AssertionError(f"constraints.txt:{number}: {raw!r} is not an exact 'name==X' pin")
        name = canonicalize_name(match[1])
        if name in pins:
            raise AssertionError(f"constraints.txt:{number}: {match[1]} pinned twice")
        pins[name] = Version(match[2])
    return pins


@pytest.fixture(scope="module")
def lock() -> dict[str, Version]:
    return parse_lock((ROOT / "constraints.txt").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def project() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]


def project_requirements(project: dict) -> list[Requirement]:
    reqs = [Requirement(r) for r in project["dependencies"]]
    for extra in project.get("optional-dependencies", {}).values():
        reqs += [Requirement(r) for r in extra]
    return [r for r in reqs if canonicalize_name(r.name) != canonicalize_name(project["name"])]


def environment_pip_lines() -> list[str]:
    env = yaml.safe_load((ROOT / "environment.yml").read_text(encoding="utf-8"))
    pip = [d["pip"] for d in env["dependencies"] if isinstance(d, dict) and "pip" in d]
    assert len(pip) == 1, "environment.yml needs exactly one pip section"
    return [str(line).strip() for line in pip[0]]


def test_parse_lock_rejects_ranges_and_duplicates():
    assert parse_lock("numpy==2.4.6\n# c\n\nTorch==2.13.0\n") == {
        "numpy": Version("2.4.6"),
        "torch": Version("2.13.0"),
    }
    with pytest.raises(AssertionError, match="not an exact"):
        parse_lock("numpy>=2\n")
    with pytest.raises(AssertionError, match="twice"):
        parse_lock("numpy==2.4.6\nNumPy==2.4.5\n")


def test_every_project_requirement_is_pinned_and_the_pin_is_in_range(lock, project):
    problems = []
    for req in project_requirements(project):
        pin = lock.get(canonicalize_name(req.name))
        if pin is None:
            problems.append(f"{req.name}: in pyproject.toml but not pinned in constraints.txt")
        elif not req.specifier.contains(pin, prereleases=True):
            problems.append(f"{req.name}: lock has {pin}, pyproject.toml wants {req.specifier}")
    assert not problems, "\n".join(problems)


def test_the_installed_environment_is_the_locked_one(lock):
    drift = []
    for name, pin in lock.items():
        try:
            installed = Version(importlib.metadata.version(name))
        except importlib.metadata.PackageNotFoundError:
            continue
        if installed.public != pin.public:
            drift.append(f"{name}: installed {installed}, lock {pin}")
    assert not drift, "the test environment drifted from constraints.txt:\n" + "\n".join(drift)


def test_the_lock_covers_every_installed_distribution(lock, project):
    """Everything installed beside the package is pinned (else Binder, Colab and CI may each
    get a different release of it)."""
    unpinned = sorted(
        f"{dist.metadata['Name']}=={dist.version}"
        for dist in importlib.metadata.distributions()
        if canonicalize_name(dist.metadata["Name"]) not in lock
        and canonicalize_name(dist.metadata["Name"]) not in {"pip", project["name"]}
    )
    assert not unpinned, "installed but not pinned in constraints.txt: " + ", ".join(unpinned)


def test_environment_yml_python_matches_pyproject(project):
    env = yaml.safe_load((ROOT / "environment.yml").read_text(encoding="utf-8"))
    pythons = [
        str(d) for d in env["dependencies"] if isinstance(d, str) and re.match(r"python\b", d)
    ]
    assert len(pythons) == 1, "environment.yml must name python exactly once"
    match = re.fullmatch(r"python\s*=?=\s*(\d+\.\d+)(\.\*)?", pythons[0])
    assert match, f"environment.yml: pin python as 'python=3.X', got {pythons[0]!r}"
    assert SpecifierSet(project["requires-python"]).contains(f"{match[1]}.0"), (
        f"environment.yml python {match[1]} is outside requires-python "
        f"{project['requires-python']}"
    )


def test_environment_yml_installs_the_package_with_the_lock(project):
    lines = environment_pip_lines()
    assert any(re.fullmatch(r"(-c|--constraint)[ =]constraints\.txt", x) for x in lines), (
        "environment.yml's pip section must use the lock: '--constraint constraints.txt'"
    )
    local = [re.fullmatch(r"\.(?:\[([^\]]*)\])?", x) for x in lines]
    local = [m for m in local if m]
    assert len(local) == 1, "environment.yml must install this repository once: '.[book]'"
    extras = {e.strip() for e in (local[0][1] or "").split(",")}
    assert "book" in extras, "Binder needs the package's book extras: '.[book]'"


def test_environment_yml_versions_equal_the_lock(lock):
    env = yaml.safe_load((ROOT / "environment.yml").read_text(encoding="utf-8"))
    problems = []
    conda = [d for d in env["dependencies"] if isinstance(d, str)]
    for dep in conda:
        match = re.fullmatch(r"([A-Za-z0-9._-]+)\s*=?=\s*([^\s=]+)", dep)
        if match is None or canonicalize_name(match[1]) == "python":
            continue
        pin = lock.get(canonicalize_name(match[1]))
        if pin is None or Version(match[2].rstrip(".*")) != pin:
            problems.append(f"conda {dep}: lock has {pin}")
    for line in environment_pip_lines():
        if line.startswith("-") or line.startswith("."):
            continue
        req = Requirement(line)
        pin = lock.get(canonicalize_name(req.name))
        if pin is None:
            problems.append(f"pip {line}: not in constraints.txt")
        elif str(req.specifier) != f"=={pin}":
            problems.append(f"pip {line}: must be pinned to the lock's =={pin}")
    assert not problems, "environment.yml disagrees with constraints.txt:\n" + "\n".join(problems)


def test_pre_commit_hook_versions_equal_the_lock(lock):
    config = yaml.safe_load((ROOT / ".pre-commit-config.yaml").read_text(encoding="utf-8"))
    revs = {repo["repo"].rstrip("/").rsplit("/", 1)[-1]: repo.get("rev") for repo in
            config["repos"]}
    assert revs.get("ruff-pre-commit") == f"v{lock['ruff']}", "ruff hook rev != lock's ruff"
    assert revs.get("jupytext") == f"v{lock['jupytext']}", "jupytext hook rev != lock's jupytext"


def test_pages_workflow_uses_the_lock_and_python_3_11():
    text = (ROOT / ".github" / "workflows" / "book.yml").read_text(encoding="utf-8")
    workflow = yaml.safe_load(text)
    container = workflow["jobs"]["build"]["container"]
    image = container["image"] if isinstance(container, dict) else container
    assert image.startswith("python:3.11"), f"the Pages build must run Python 3.11, not {image}"
    assert "scripts/build_book.sh" in text and "scripts/run_tests.sh" in text


def test_vendored_mathjax_is_the_recorded_release():
    """Every vendored MathJax file is listed in SHA256SUMS with its hash, the list is the
    recorded one, and the components _config.yml loads are there."""
    sums = MATHJAX / "SHA256SUMS"
    assert hashlib.sha256(sums.read_bytes()).hexdigest() == MATHJAX_SUMS_SHA256, (
        "book/_static/mathjax/SHA256SUMS changed: see its README")
    listed = {}
    for line in sums.read_text(encoding="utf-8").splitlines():
        digest, name = line.split(maxsplit=1)
        listed[name] = digest
    present = {str(p.relative_to(MATHJAX)) for p in MATHJAX.rglob("*") if p.is_file()}
    assert present - {"README.md", "LICENSE", "SHA256SUMS"} == set(listed), (
        "files in book/_static/mathjax that SHA256SUMS does not list, or listed ones missing")
    for name, digest in listed.items():
        assert hashlib.sha256((MATHJAX / name).read_bytes()).hexdigest() == digest, (
            f"book/_static/mathjax/{name} differs from the release: see its README")
    assert f'VERSION="{MATHJAX_VERSION}"' in (MATHJAX / "core.js").read_text(encoding="utf-8")
    assert f"mathjax@{MATHJAX_VERSION}" in (MATHJAX / "README.md").read_text(encoding="utf-8")
    assert "Apache License" in (MATHJAX / "LICENSE").read_text(encoding="utf-8")
    sphinx = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))["sphinx"]
    config = sphinx["config"]
    assert (MATHJAX.parent / config["mathjax_path"]).is_file(), config["mathjax_path"]
    for component in config["mathjax3_config"]["loader"]["load"]:
        assert f"{component}.js" in listed, f"_config.yml loads {component}, not vendored"


def test_ci_checks_colabs_python_and_the_simulated_colab_install(project):
    """requires-python admits Colab's 3.13, and both CIs run the 3.13 check and the Colab
    simulation (scripts/run_py313.sh, scripts/simulate_colab.sh)."""
    assert SpecifierSet(project["requires-python"]).contains("3.13.0")
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    workflow = yaml.safe_load((ROOT / ".github" / "workflows" / "book.yml").read_text(
        encoding="utf-8"))
    job = workflow["jobs"]["py313"]
    assert job["container"].startswith("python:3.13")
    runs = " ".join(step.get("run", "") for step in job["steps"])
    for script in ("scripts/run_py313.sh", "scripts/simulate_colab.sh"):
        assert f"bash {script}" in ci and script in runs, f"{script} is not run by CI"
    assert "download.pytorch.org/whl/cpu" in job["env"]["PIP_EXTRA_INDEX_URL"], (
        "the 3.13 job needs the PyTorch CPU index for a CPU torch")


def test_torch_range_admits_colabs_torch_and_the_lock(lock, project):
    """The floor is Colab's torch (2.11, kept by the install cell); the lock's torch, which
    every CI run tests, lies inside."""
    spec = next(Requirement(r) for r in project["dependencies"] if r.startswith("torch"))
    assert spec.specifier.contains("2.11.0+cu126") and not spec.specifier.contains("2.10.0")
    assert spec.specifier.contains(lock["torch"])
