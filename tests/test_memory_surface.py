"""The façade's surface: ``Memory`` is ``AsyncMemory`` method for method (names, signatures,
docstrings), visible to ``dir()``, ``help()`` and editors; derived stores can be shared."""

from __future__ import annotations

import inspect
import pydoc
from pathlib import Path
import pytest

from graphmem import AsyncMemory, Memory, _sync
from graphmem.errors import ValidationError
from graphmem.facade.derived import DerivedStores

# AsyncMemory's own names for what Memory spells the synchronous way.
ASYNC_ONLY = {"aclose"}
SYNC_ONLY = {"close", "aio"}


def public(cls: type) -> dict[str, object]:
    return {n: v for n, v in vars(cls).items() if not n.startswith("_")}


def test_memory_has_every_method_of_async_memory_with_its_signature_and_docstring():
    amem, mem = public(AsyncMemory), public(Memory)
    assert set(amem) - ASYNC_ONLY == set(mem) - SYNC_ONLY
    for name, a in amem.items():
        if name in ASYNC_ONLY:
            continue
        s = mem[name]
        if isinstance(a, property):
            assert isinstance(s, property), name
            assert a.__doc__ == s.__doc__, name
            continue
        assert inspect.signature(a) == inspect.signature(s), name
        assert inspect.getdoc(a) == inspect.getdoc(s), name
        # a coroutine in the core, a plain call in the twin
        assert not inspect.iscoroutinefunction(s), name


def test_memory_and_async_memory_take_the_same_arguments():
    assert inspect.signature(AsyncMemory.__init__) == inspect.signature(Memory.__init__)


def test_help_and_dir_list_the_operations():
    names = dir(Memory)
    for name in ("search", "record_turn", "about", "context", "save_session_insights",
                 "retire", "sync", "close"):
        assert name in names
    text = pydoc.render_doc(Memory, renderer=pydoc.plaintext)
    assert "search(self, query: 'str', scope: 'str' = 'spec'" in text
    assert "Append a conversation turn; returns its id once it is on disk." in text
    assert "Everything known about a file or symbol of this project" in text
    assert "__getattr__" not in vars(Memory)


def test_a_shared_store_serves_every_memory_given_it(spec_dir: Path, tmp_path: Path):
    """One ``DerivedStores`` (the warm search server's) given to two façades: both search it,
    and closing a façade that was given it leaves it open for the others."""
    with Memory(spec_dir) as m:
        m.append_gotcha("The zebrafish heater trips the breaker above 30 C.")
        settings = m.settings
    shared = DerivedStores(settings)
    a = AsyncMemory(spec_dir, settings=settings, derived=shared)
    b = AsyncMemory(None, spec_dir.parent.parent, settings=settings, derived=shared)
    assert a.derived is shared and b.derived is shared
    hits = _sync.run(a.search("zebrafish heater breaker"))
    assert [h.text for h in hits][:1] == ["The zebrafish heater trips the breaker above 30 C."]
    assert _sync.run(b.search("zebrafish heater breaker", scope="project"))[0].id == hits[0].id
    _sync.run(shared.aclose())


def test_project_only_memory_writes_the_projects_own_memory_folder(spec_dir: Path):
    project = spec_dir.parent.parent
    with Memory(None, project) as m:
        m.append_gotcha("x y z")
        sid = m.start_session()
        assert m.load_gotchas() == ["x y z"] and m.spec_key == ".graphmem"
        assert m.files.memory_dir == project.resolve() / ".graphmem" / "memory"
        assert m.sync()["remaining"] == 0
    assert (project / ".graphmem" / "memory" / "gotchas.md").read_text().count("x y z") == 1
    assert (project / ".graphmem" / "memory" / "episodes" / sid).is_dir()
    assert not (spec_dir / "memory" / "gotchas.md").exists()  # the spec folder is not touched


def test_check_turn_refuses_what_record_turn_refuses_and_writes_nothing(spec_dir: Path):
    import pytest

    from graphmem import ValidationError

    with Memory(spec_dir) as m:
        for args, field in ((("user", ""), "content"),
                            (("user", "hi", None, -1), "tokens"), ((5, "hi"), "role")):
            with pytest.raises(ValidationError) as err:
                m.check_turn(*args)
            assert err.value.field == field
        assert m.check_turn("user", "a fine turn") is None
    assert not (spec_dir / "memory").exists()


def test_the_former_name_backends_still_works_and_says_it_is_deprecated(spec_dir: Path):
    """``backends`` (keyword and property) was renamed ``derived``: old callers keep working
    with a DeprecationWarning; giving both names is refused, naming the field."""
    with Memory(spec_dir) as m:
        settings = m.settings
    shared = DerivedStores(settings)
    with pytest.warns(DeprecationWarning, match="derived"):
        a = AsyncMemory(spec_dir, settings=settings, backends=shared)
    with pytest.warns(DeprecationWarning, match="derived"):
        assert a.backends is shared
    assert a.derived is shared
    with pytest.raises(ValidationError) as err:
        Memory(spec_dir, settings=settings, derived=shared, backends=shared)
    assert err.value.field == "backends"
    _sync.run(shared.aclose())
