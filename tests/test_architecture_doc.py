"""docs/architecture.md is the folder list: every module of graphmem is named in its folder's section."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DOC = REPO / "docs" / "architecture.md"
TREES = {"src/graphmem": "", "providers": "providers"}  # providers/ ships as graphmem.providers


def modules() -> list[str]:
    """Every module as ``folder/name.py`` (``name.py`` at the package root)."""
    found = []
    for top, prefix in TREES.items():
        base = REPO / top
        for path in sorted(base.rglob("*.py")):
            found.append("/".join(filter(None, [prefix, *path.relative_to(base).parts])))
    return found


def sections(text: str) -> dict[str, str]:
    """Each bold-headed paragraph's text by the folder its heading names: ``**File store
    (`files/`)**`` -> ``files``; ``**Package root**`` -> ``""``."""
    parts = re.split(r"^\*\*(.+?)\*\*", text, flags=re.M)
    out: dict[str, str] = {}
    for head, body in zip(parts[1::2], parts[2::2]):
        folder = re.search(r"`([\w/]+)/`", head)
        if folder or head == "Package root":
            out[folder.group(1) if folder else ""] = body.split("\n\n")[0]
    return out


def unnamed(text: str) -> list[str]:
    """The modules the document does not name in their folder's section."""
    by_folder = sections(text)
    missing = []
    for module in modules():
        folder, _, name = module.rpartition("/")
        if name == "__init__.py" and folder not in ("", "providers"):
            continue  # a folder's ``__init__`` describes the folder (its docstring, checked below)
        if f"`{name}`" not in by_folder.get(folder, ""):
            missing.append(module)
    return missing


def test_every_module_is_named_in_its_folders_section():
    assert unnamed(DOC.read_text()) == []


def test_every_folder_says_what_it_is():
    """Each folder's ``__init__.py`` opens with a docstring: the folder's one-paragraph description."""
    import ast

    bare = [m for m in modules() if m.endswith("/__init__.py") and not ast.get_docstring(
        ast.parse((REPO / ("src/graphmem/" + m if not m.startswith("providers/") else m)).read_text()))]
    assert bare == []


def test_a_module_left_out_is_reported():
    """The check can fail: a module dropped from the document, or named under another folder."""
    text = DOC.read_text()
    assert unnamed(text.replace("`lru.py`", "`l_r_u.py`")) == ["lru.py"]
    assert "files/lock.py" in unnamed(text.replace("`lock.py`", "`lock`"))


def test_no_two_modules_share_a_name():
    """One name per idea: a module's file name says which module it is, wherever it is imported
    from (a folder's ``__init__``/``__main__`` aside)."""
    from collections import Counter

    names = Counter(m.rpartition("/")[2] for m in modules()
                    if m.rpartition("/")[2] not in ("__init__.py", "__main__.py"))
    assert [n for n, count in names.items() if count > 1] == []
