"""``graphmem hooks install|uninstall`` and ``graphmem anchors refresh`` on a real git repository:
the hooks are run by ``git commit`` itself; freshness is right with and without them.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from conftest import run_cli
from graphmem import Memory
from test_code_freshness import PAY, commit, git, project

USER_HOOK = "#!/bin/sh\necho \"user hook $1\" >> \"$(git rev-parse --show-toplevel)/../user-hook.log\"\nexit 0\n"


def fresh(root: Path, spec: Path) -> dict[str, str]:
    with Memory(spec, root) as mem:
        return {h.text: h.metadata["freshness"]["state"]
                for h in mem.search("refund charge", scope="project", limit=10)}


def states_file(spec: Path) -> Path:
    return spec / "memory" / "anchor_states.json"


def wait_for_head(spec: Path, head: str, timeout: float = 60.0) -> dict:
    """The hook's refresh runs detached: wait until it has written the new HEAD."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            data = json.loads(states_file(spec).read_text())
            if data.get("head") == head:
                return data
        except (OSError, ValueError):
            pass
        time.sleep(0.2)
    raise AssertionError(f"the hook's refresh did not record HEAD {head} in {timeout}s")


def test_freshness_is_right_with_and_without_hooks_run_by_git_commit(tmp_path):
    root, spec = project(tmp_path, {"src/pay.py": PAY, "src/api.py": "def handle():\n    pass\n"})
    hooks = Path(git(root, "rev-parse", "--git-path", "hooks"))
    hooks = hooks if hooks.is_absolute() else root / hooks
    hooks.mkdir(parents=True, exist_ok=True)
    (hooks / "post-commit").write_text(USER_HOOK)
    (hooks / "post-commit").chmod(0o755)
    with Memory(spec, root) as mem:
        mem.append_gotcha("Refunds go through `refund`")
        mem.append_gotcha("The api handle() is slow; charge requests queue")

    # without hooks: an edit is seen at read time, and nothing wrote anchor states
    (root / "src" / "pay.py").write_text(PAY.replace("order.total", "order.total - order.fee"))
    commit(root, "fee")
    without = fresh(root, spec)
    assert without["Refunds go through `refund`"] == "changed"
    assert not states_file(spec).exists()

    out = run_cli("hooks", "install", "--project-dir", str(root), "--json")
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)
    assert got["installed"] == ["post-commit", "post-merge", "post-checkout", "post-rewrite"]
    assert got["chained"] == ["post-commit"]
    assert (hooks / "post-commit.graphmem-user").read_text() == USER_HOOK
    again = run_cli("hooks", "install", "--project-dir", str(root), "--json")  # idempotent
    assert again.returncode == 0 and json.loads(again.stdout)["chained"] == []

    git(root, "mv", "src/pay.py", "src/payments.py")
    commit(root, "rename")  # git runs post-commit: the user's hook, then the refresh, detached
    head = git(root, "rev-parse", "HEAD")
    data = wait_for_head(spec, head)
    assert (tmp_path / "user-hook.log").read_text().count("user hook") == 2  # "fee", then chained
    with_hooks = fresh(root, spec)
    assert with_hooks["Refunds go through `refund`"] == "moved"
    assert {data["states"][i]["state"] for i in data["states"]} >= {"moved"}
    with Memory(spec, root) as mem:
        rid = mem.search("refund", limit=1)[0].id
    assert data["states"][rid]["moved"] == {"src/pay.py": "src/payments.py"}

    git(root, "checkout", "-q", "-b", "topic")  # post-checkout too
    (root / "src" / "payments.py").unlink()
    commit(root, "drop payments")
    data = wait_for_head(spec, git(root, "rev-parse", "HEAD"))
    assert data["states"][rid]["state"] == "gone" == fresh(root, spec)["Refunds go through `refund`"]

    out = run_cli("hooks", "uninstall", "--project-dir", str(root), "--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["restored"] == ["post-commit"]
    assert (hooks / "post-commit").read_text() == USER_HOOK
    assert not (hooks / "post-merge").exists() and not (hooks / "post-checkout").exists()
    # uninstalled: the user's own hook runs alone again, reads stay right
    (root / "src" / "api.py").write_text("def handle():\n    return 1\n")
    commit(root, "api")
    assert (tmp_path / "user-hook.log").read_text().count("user hook") == 4
    assert fresh(root, spec)["The api handle() is slow; charge requests queue"] == "changed"


def test_hooks_refuse_what_they_would_overwrite_and_need_git(tmp_path):
    root, spec = project(tmp_path, {"src/pay.py": PAY})
    hooks = root / ".git" / "hooks"
    (hooks / "post-merge").write_text("#!/bin/sh\nexit 0\n")
    (hooks / "post-merge.graphmem-user").write_text("#!/bin/sh\nexit 0\n")
    out = run_cli("hooks", "install", "--project-dir", str(root))
    assert out.returncode != 0 and "post-merge" in out.stderr and "refusing" in out.stderr
    assert not (hooks / "post-commit").exists()  # nothing was changed
    plain, _ = project(tmp_path / "nogit", {"a.py": "x = 1\n"}, use_git=False)
    out = run_cli("hooks", "install", "--project-dir", str(plain))
    assert out.returncode != 0 and "not a git repository" in out.stderr
    out = run_cli("anchors", "refresh", "--project-dir", str(plain), "--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["head"] is None


def test_hooks_installed_in_one_work_tree_refresh_the_work_tree_git_commits_in(tmp_path):
    root, spec = project(tmp_path, {"src/pay.py": PAY})
    other = tmp_path / "other tree"  # a second work tree of the same repository shares its hooks
    git(root, "worktree", "add", "-q", "-b", "side", str(other))
    other_spec = other / "specs" / "001"
    other_spec.mkdir(parents=True)
    with Memory(other_spec, other) as mem:
        mem.append_gotcha("Refunds go through `refund`")
    out = run_cli("hooks", "install", "--project-dir", str(root))
    assert out.returncode == 0, out.stderr
    (other / "src" / "pay.py").write_text(PAY.replace("order.total", "order.total - order.fee"))
    commit(other, "fee")  # git runs the shared post-commit in the other work tree
    data = wait_for_head(other_spec, git(other, "rev-parse", "HEAD"))
    assert {s["state"] for s in data["states"].values()} == {"changed"}


def test_a_refresh_that_arrives_after_the_next_commit_marks_its_states_late(tmp_path,
                                                                           monkeypatch):
    import graphmem.facade.about as about_facade

    root, spec = project(tmp_path, {"src/pay.py": PAY})
    with Memory(spec, root) as mem:
        mem.append_gotcha("Refunds go through `refund`")
        assert mem.refresh_anchors()["late"] is False
        on_time = json.loads(states_file(spec).read_text())
        plain, commits = about_facade.item_state, []

        def slow_state(rec, snap):  # another commit lands while the refresh computes
            if not commits:
                (root / "src" / "pay.py").write_text(PAY.replace("order.total", "0"))
                commit(root, "zero refunds")
                commits.append(git(root, "rev-parse", "HEAD"))
            return plain(rec, snap)

        monkeypatch.setattr(about_facade, "item_state", slow_state)
        first = git(root, "rev-parse", "HEAD")
        got = mem.refresh_anchors()
        late = json.loads(states_file(spec).read_text())
        monkeypatch.setattr(about_facade, "item_state", plain)
        again = mem.refresh_anchors()  # what the newer commit's hook runs
        newer = json.loads(states_file(spec).read_text())
    assert "late" not in on_time
    assert got["late"] is True and late["late"] is True and late["head"] == first
    assert again["late"] is False and "late" not in newer and newer["head"] == commits[0]
