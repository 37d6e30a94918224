"""The version lock (constraints.txt) that `make install` installs: it pins every dependency pyproject.toml names,
at a version pyproject.toml allows, and leaves torch and triton to the Makefile and the GPU machine."""

import re
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[1]
UNLOCKED = {"torch", "triton"}


def locked_versions() -> dict[str, str]:
    versions = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        if not line or line.startswith("#"):
            continue
        match = re.fullmatch(r"([A-Za-z0-9_.\-]+)==([^\s=]+)", line)
        assert match, f"constraints.txt: {line!r} is not NAME==VERSION"
        name = canonicalize_name(match[1])
        assert name not in versions, f"constraints.txt pins {name} twice"
        versions[name] = match[2]
    return versions


def declared_requirements() -> list[Requirement]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    return [Requirement(text) for text in [*project["dependencies"], *extras["notebooks"], *extras["test"]]]


def test_every_declared_dependency_is_locked_within_its_bounds() -> None:
    versions = locked_versions()
    for requirement in declared_requirements():
        name = canonicalize_name(requirement.name)
        if name in UNLOCKED:
            assert name not in versions, f"constraints.txt pins {name}, which the Makefile and GPU machines choose"
            continue
        assert name in versions, f"pyproject.toml needs {name}, which constraints.txt does not pin"
        assert requirement.specifier.contains(versions[name], prereleases=True), (
            f"constraints.txt pins {name}=={versions[name]}, outside pyproject.toml's {requirement.specifier}")


def test_the_makefile_installs_through_the_lock() -> None:
    makefile = (ROOT / "Makefile").read_text()
    assert re.search(r"^CONSTRAINTS \?= constraints\.txt$", makefile, re.MULTILINE)
    assert "pip install -e '.[notebooks,test]' $(if $(CONSTRAINTS),--constraint $(CONSTRAINTS))" in makefile
