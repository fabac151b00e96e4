"""The helpers written once for every caller: times without a zone, id hashing, pydantic error
wording, the folder checks before a Memory opens, and rich set up for another process."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pydantic
import pytest

from conftest import run_cli
from graphmem import Memory
from graphmem.errors import NotFoundError, ValidationError, first_problem
from graphmem.models import check_folders, hash_id, parse_iso, stable_id, to_time


@pytest.fixture
def far_from_utc():
    """The process runs in UTC+05:30, so a naive time read as local would move."""
    import os

    before = os.environ.get("TZ")
    os.environ["TZ"] = "Asia/Kolkata"
    time.tzset()
    yield
    if before is None:
        os.environ.pop("TZ", None)
    else:
        os.environ["TZ"] = before
    time.tzset()


def test_a_naive_time_is_utc_in_calls_and_in_files_alike(spec_dir: Path, far_from_utc):
    naive = datetime(2026, 5, 1, 9, 30)
    utc = naive.replace(tzinfo=timezone.utc)
    assert datetime(2026, 5, 1, 9, 30).astimezone().utcoffset() == timedelta(hours=5, minutes=30)
    assert to_time(naive) == to_time(naive.isoformat()) == parse_iso(naive.isoformat()) == utc
    assert to_time(naive.replace(tzinfo=timezone(timedelta(hours=2)))) == utc - timedelta(hours=2)
    with Memory(spec_dir) as m:
        sid = m.start_session(model="m", at=naive)
        m.record_turn(sid, "user", "from a datetime", at=naive)
        m.record_turn(sid, "user", "from ISO text", at=naive.isoformat())
        turns = m.get_session_history(sid)
    assert [parse_iso(t["at"]) for t in turns] == [utc, utc]


def test_bad_times_name_their_argument():
    for bad in ("yesterday", float("nan"), True, [2026]):
        with pytest.raises(ValidationError, match="^at: must be"):
            to_time(bad)


def test_every_id_is_one_hash(tmp_path):
    from graphmem.files.episode_items import item_id
    from graphmem.graph.schema import derived_id

    parts = ("project", "specs/001", "turn", "s-1", "trn-1")
    assert item_id(*parts) == derived_id(*parts) == hash_id(*parts)
    assert len(hash_id(*parts)) == 24 and hash_id(*parts) != hash_id(*parts[:-1])
    assert stable_id("A  Gotcha", "Text") == hash_id("a gotcha", "text")  # normalised first
    assert len(item_id("bad \ud800 surrogate")) == 24  # was a UnicodeEncodeError


class _Pair(pydantic.BaseModel):
    n: int
    word: str

    @pydantic.field_validator("word")
    @classmethod
    def _word(cls, v: str) -> str:
        if not v.isalpha():
            raise ValueError("must be letters")
        return v


def test_pydantic_problems_are_worded_once():
    from graphmem.serve.mcp_server import _arguments_message
    from graphmem.models import parse
    from graphmem.rules.turn_input import validate

    with pytest.raises(pydantic.ValidationError) as caught:
        _Pair.model_validate({"n": "x", "word": "1"})
    assert first_problem(caught.value) == (
        ("n",), "Input should be a valid integer, unable to parse string as an integer "
                "(and 1 more problem(s))")
    with pytest.raises(ValidationError, match=r"^pair\.word: must be letters$"):
        parse(_Pair, {"n": 1, "word": "1"}, "pair")
    with pytest.raises(ValidationError, match=r"^word: must be letters$"):
        validate(_Pair, {"n": 1, "word": "1"})
    assert _arguments_message(caught.value).startswith("graphmem: error: n: Input should be")


def test_folders_are_checked_once_before_memory_opens(tmp_path: Path, spec_dir: Path):
    missing = tmp_path / "nowhere"
    check_folders(spec=spec_dir, project=None)
    with pytest.raises(NotFoundError, match=f"^project folder not found: {missing}$"):
        check_folders(spec=spec_dir, project=missing)
    for argv in (("gotchas", "--spec-dir", str(missing)),
                 ("sessions", "--project-dir", str(missing)),
                 ("search", "x", "--project-dir", str(missing)),
                 ("reindex", "--project-dir", str(missing))):
        done = run_cli(*argv)
        what = "spec" if "--spec-dir" in argv else "project"
        assert (done.returncode, done.stderr) == (
            4, f"graphmem: error: {what} folder not found: {missing}\n"), argv


ROWS = [{"kind": "gotcha", "score": 0.8123, "backend": "local", "project": "p",
         "source": "specs/001/memory/gotchas.md", "metadata": {"author": "ana@example.com"},
         "text": "The staging proxy strips Authorization headers on redirects, so a login that "
                 "works locally fails behind it; keep the token in a cookie there."}]

CLIENT = """
import json, sys
from graphmem.cli.app import _console
from graphmem.cli.search_commands import show_hits
show_hits(json.loads(sys.argv[1]), _console())
"""


@pytest.mark.parametrize("env", [
    {}, {"COLUMNS": "40"}, {"FORCE_COLOR": "1"}, {"FORCE_COLOR": "1", "COLORTERM": "truecolor"},
    {"FORCE_COLOR": "1", "TERM": "xterm-256color", "COLUMNS": "60"},
    {"FORCE_COLOR": "1", "NO_COLOR": "1"}, {"TTY_COMPATIBLE": "1", "TERM": "dumb"},
    {"FORCE_COLOR": ""}, {"TTY_COMPATIBLE": "0", "FORCE_COLOR": "1"}])
def test_the_server_renders_as_the_piped_client_would(env):
    """``console_for`` (rich's public arguments) prints what rich prints in the CLI itself."""
    import os

    from graphmem.cli.search_commands import show_hits
    from graphmem.cli.display import RICH_ENV, console_for

    clean = {k: v for k, v in os.environ.items() if k not in RICH_ENV}
    client = subprocess.run([sys.executable, "-c", CLIENT, json.dumps(ROWS)], env=dict(clean, **env),
                            capture_output=True, text=True, timeout=120)
    assert client.returncode == 0, client.stderr
    buf = io.StringIO()
    show_hits(ROWS, console_for(env, buf))
    assert buf.getvalue() == client.stdout
