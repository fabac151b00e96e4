"""The package metadata ships what the code needs: data files, the licence, the mcp it imports."""

from __future__ import annotations

import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
SETUPTOOLS = PYPROJECT["tool"]["setuptools"]


def _package_folder(package: str) -> Path:
    """Where ``package`` lives in the source tree, by the ``package-dir`` mapping."""
    mapping = SETUPTOOLS["package-dir"]
    parts = package.split(".")
    for i in range(len(parts), 0, -1):
        prefix = ".".join(parts[:i])
        if prefix in mapping:
            return REPO / mapping[prefix] / Path(*parts[i:])
    return REPO / mapping[""] / Path(*parts)


def test_every_folder_of_the_package_is_declared_with_its_data():
    """A folder setuptools would skip (it warns "Package would be ignored") is a missing file."""
    declared = set(SETUPTOOLS["packages"])
    data = SETUPTOOLS.get("package-data", {})
    for package in sorted(declared):
        root = _package_folder(package)
        folders = [p for p in root.iterdir()
                   if p.is_dir() and p.name.isidentifier() and not p.name.startswith("__")]
        for folder in folders:
            if any(f.is_file() for f in folder.iterdir()):
                assert f"{package}.{folder.name}" in declared, f"{folder} is not in packages"
        loose = sorted(f.name for f in root.iterdir() if f.is_file() and f.suffix != ".py")
        if loose:
            patterns = data.get(package, [])
            for name in loose:
                assert any(Path(name).match(p) for p in patterns), f"{package}: {name} undeclared"


def test_licence_is_an_spdx_string_with_its_file():
    project = PYPROJECT["project"]
    assert project["license"] == "MIT"
    assert project["license-files"] == ["LICENSE"]
    assert "Copyright (c) 2026 the graphmem authors" in (REPO / "LICENSE").read_text(encoding="utf-8")
    assert any(r.startswith("setuptools>=77") for r in PYPROJECT["build-system"]["requires"])


def test_mcp_floor_has_the_server_api_graphmem_imports():
    """mcp.server.mcpserver (with UnexpectedToolError) first shipped in mcp 2.1."""
    deps = [d.replace(" ", "") for d in PYPROJECT["project"]["dependencies"]]
    assert any(d.startswith("mcp>=2.1") for d in deps), deps
    from mcp.server.mcpserver.exceptions import UnexpectedToolError  # noqa: F401 - the floor's reason


def test_version_has_one_source():
    """pyproject reads the version from graphmem.__version__ (what ``--version`` prints)."""
    assert "version" not in PYPROJECT["project"] and "version" in PYPROJECT["project"]["dynamic"]
    assert SETUPTOOLS["dynamic"]["version"] == {"attr": "graphmem.__version__"}


def test_every_library_the_code_imports_is_declared():
    """A third-party import that is not in ``dependencies`` works only while another package
    happens to pull it in (python-dotenv did, through graphiti-core)."""
    import re
    import sys
    from importlib.metadata import packages_distributions

    from test_layers import graph

    def norm(name: str) -> str:
        return re.sub(r"[-_.]+", "-", name).lower()

    declared = {norm(re.split(r"[<>=!~\[; ]", d)[0]) for d in PYPROJECT["project"]["dependencies"]}
    owners = packages_distributions()
    tops = {dep.split(".")[0] for deps in graph().values() for dep in deps}
    foreign = sorted(t for t in tops if t and t != "graphmem" and t not in sys.stdlib_module_names)
    missing = [t for t in foreign if not any(norm(d) in declared for d in owners.get(t, []))]
    assert missing == [], f"imported but not declared in pyproject.toml: {missing}"
