"""One gotcha is one bullet to every line-based reader (issue 14 finding 9).

A carriage return, a Unicode line or paragraph separator, NEL, a vertical tab or a form feed inside
a gotcha or pattern becomes a space when it is written, so graphmem, the reference memory module
(which reads with universal newlines and splits on ``\\n``) and ``str.splitlines`` readers all see
the same bullets; a lone ``\\n`` is refused as before. graphmem also reads a file that already
holds a carriage return the way the reference does.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from test_mcp import _data, _session

from graphmem import Memory
from graphmem.serve.mcp_server import build_server
from reference_impl import load_reference, reference_file, skip_reason

SEPARATORS = {"CR": "\r", "CRLF": "\r\n", "LS": "\u2028", "PS": "\u2029", "NEL": "\u0085",
              "VT": "\x0b", "FF": "\x0c", "FS": "\x1c", "GS": "\x1d", "RS": "\x1e"}


def bullets_by_lines(text: str) -> list[str]:
    """What a ``splitlines`` reader takes for bullets."""
    return [ln.strip()[2:].strip() for ln in text.splitlines() if ln.strip().startswith("- ")]


def written(spec_dir: Path, kind: str) -> str:
    return (spec_dir / "memory" / f"{kind}s.md").read_bytes().decode("utf-8")


@pytest.mark.parametrize("name", list(SEPARATORS))
def test_a_separator_inside_a_bullet_becomes_a_space(spec_dir: Path, name: str):
    sep = SEPARATORS[name]
    with Memory(spec_dir) as m:
        m.append_gotcha(f"close the pool{sep}# Not a heading{sep}- not a second bullet")
        m.append_pattern(f"wrap handlers{sep}in retry()")
        assert m.load_gotchas() == ["close the pool # Not a heading - not a second bullet"]
        assert m.load_patterns() == ["wrap handlers in retry()"]
        assert m.append_gotcha("close the pool # Not a heading - not a second bullet").files == \
            "unchanged"
    for kind, expected in (("gotcha", m.load_gotchas()), ("pattern", m.load_patterns())):
        text = written(spec_dir, kind)
        assert bullets_by_lines(text) == expected
        assert not any(c in text for c in SEPARATORS.values() if c != "\n")


def test_the_reference_reader_sees_the_same_bullets(tmp_path: Path, spec_dir: Path):
    if reference_file() is None:
        pytest.skip(skip_reason())
    ref = load_reference(tmp_path / "refmod")
    with Memory(spec_dir) as m:
        for name, sep in SEPARATORS.items():
            m.append_gotcha(f"{name} first{sep}# heading{sep}- second")
            m.append_pattern(f"{name} one{sep}two")
        mine = m.load_gotchas(), m.load_patterns()
    assert ref.load_gotchas(spec_dir) == mine[0] and len(mine[0]) == len(SEPARATORS)
    assert ref.load_patterns(spec_dir) == mine[1] and len(mine[1]) == len(SEPARATORS)
    for kind, expected in (("gotcha", mine[0]), ("pattern", mine[1])):
        assert bullets_by_lines(written(spec_dir, kind)) == expected
    ref.append_gotcha(spec_dir, "CR first # heading - second")  # a duplicate to the reference too
    assert ref.load_gotchas(spec_dir) == mine[0]


def test_graphmem_reads_a_carriage_return_as_the_reference_does(tmp_path: Path, spec_dir: Path):
    """A file written elsewhere with a bare CR (old graphmem, an editor): the same bullets."""
    mem = spec_dir / "memory"
    mem.mkdir()
    (mem / "gotchas.md").write_bytes(b"# Gotchas and Pitfalls\r\n\r\n- one\r- two\r\n- three\n")
    with Memory(spec_dir) as m:
        assert m.load_gotchas() == ["one", "two", "three"]
        m.append_gotcha("two")  # a duplicate: nothing appended
    assert (mem / "gotchas.md").read_bytes().count(b"two") == 1
    if reference_file() is not None:
        assert load_reference(tmp_path / "refmod").load_gotchas(spec_dir) == ["one", "two", "three"]


def test_mcp_bullets_are_normalised_too(spec_dir: Path):
    async def steps(c):
        _data(await c.call_tool("add_gotcha", {"text": "first\u2028second\rthird"}))
        refused = await c.call_tool("add_pattern", {"text": "two\nlines"})
        assert refused.is_error
    _session(build_server(spec_dir), steps)
    assert bullets_by_lines(written(spec_dir, "gotcha")) == ["first second third"]
