"""``archcalc docs`` writes only under -o, atomically, never over a file it did not write (without --force)."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

import archcalc.site
from archcalc.site.project import MARKER

ROOT = Path(__file__).resolve().parents[2]


def _tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture
def small_site(monkeypatch):
    """A three-file site instead of the real one: the writer's rules, quickly."""

    def render_all(root: Path, program) -> dict[Path, str]:
        return {root / "mkdocs.yml": f"# {MARKER}\nsite_name: x\n",
                root / "docs" / "index.md": f"<!-- {MARKER} -->\n# Home\n",
                root / "docs" / "models" / "gpt2.md": f"<!-- {MARKER} -->\n# GPT-2\n"}

    monkeypatch.setattr(archcalc.site, "render_all", render_all)


def test_the_real_site_goes_under_o_and_nothing_else_changes(cli, tmp_path, monkeypatch):
    """The reproducer of issue 15: 'cd proj && archcalc docs -o out' rewrote ./cli.md and others beside out/."""
    proj = tmp_path / "proj"
    proj.mkdir()
    for name in ("cli.md", "conventions.md", "gpt3.md", "attention.md", "attention-head.md", "mkdocs.yml"):
        (proj / name).write_text("mine\n")
    monkeypatch.chdir(proj)
    before = _tree(proj)
    run = cli("docs", "-o", "out")
    assert run.status == 0, run.err
    after = _tree(proj)
    assert {k: v for k, v in after.items() if not k.startswith("out/")} == before
    assert {"out/mkdocs.yml", "out/docs/index.md", "out/docs/tutorial.md", "out/docs/models/gpt3.md",
            "out/docs/assets/archcalc.js"} <= set(after)
    assert "mkdocs build -f out/mkdocs.yml" in run.out
    assert not [k for k in after if ".tmp" in k]  # atomic writes leave no temporary files
    again = cli("docs", "-o", "out")
    assert again.status == 0 and f"out: 0 file(s) written, {len(after) - len(before)} unchanged" in again.out
    assert cli("docs", "-o", "out", "--check").status == 0


def test_refuses_files_it_did_not_write_and_writes_nothing_then(cli, tmp_path, small_site):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "index.md").write_text("# my own home page\n")
    run = cli("docs", "-o", str(tmp_path))
    assert run.status == 2 and "was not written by archcalc docs; pass --force" in run.err
    assert _tree(tmp_path) == {"docs/index.md": b"# my own home page\n"}  # not even the new files
    run = cli("docs", "-o", str(tmp_path), "--force")
    assert run.status == 0 and (tmp_path / "docs" / "index.md").read_text().startswith(f"<!-- {MARKER}")


def test_force_replaces_regular_files_only(cli, tmp_path, small_site):
    (tmp_path / "mkdocs.yml").mkdir()
    run = cli("docs", "-o", str(tmp_path), "--force")
    assert run.status == 2 and "not a regular file" in run.err
    assert not (tmp_path / "docs").exists()


@pytest.mark.skipif(not hasattr(os, "symlink"), reason="no symbolic links here")
def test_refuses_to_write_through_a_symbolic_link_out_of_o(cli, tmp_path, small_site):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    site = tmp_path / "site"
    site.mkdir()
    (site / "docs").symlink_to(elsewhere, target_is_directory=True)
    run = cli("docs", "-o", str(site))
    assert run.status == 2 and "symbolic link" in run.err
    assert not list(elsewhere.iterdir())


def test_o_must_be_a_folder(cli, tmp_path, small_site):
    (tmp_path / "file").write_text("x")
    run = cli("docs", "-o", str(tmp_path / "file"))
    assert run.status == 2 and "not a folder" in run.err


def test_check_writes_nothing_and_fails_on_a_stale_file(cli, tmp_path, small_site):
    assert cli("docs", "-o", str(tmp_path)).status == 0
    page = tmp_path / "docs" / "models" / "gpt2.md"
    page.write_text(page.read_text() + "edited\n")
    run = cli("docs", "-o", str(tmp_path), "--check")
    assert run.status == 1 and f"out of date: {page}" in run.out
    assert page.read_text().endswith("edited\n")


def test_specs_columns_line_up_whatever_the_title_length(cli):
    """'archcalc specs' (the list the site's model pages come from): a long title no longer shifts its row."""
    lines = cli("specs").out.splitlines()
    assert len(lines) >= 18
    assert len({line.index("sizes:") for line in lines}) == 1
    assert any(line.startswith("transformer_2017  Transformer (Vaswani et al. 2017)") for line in lines)


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0, reason="root may write anywhere")
def test_a_folder_it_may_not_write_is_one_line_and_exit_2(cli, tmp_path, small_site):
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        run = cli("docs", "-o", str(locked))
    finally:
        locked.chmod(0o700)
    assert run.status == 2 and len(run.err.strip().splitlines()) == 1


def test_a_folder_it_cannot_create_is_one_line_and_exit_2(cli, tmp_path, small_site):
    (tmp_path / "file").write_text("x")
    run = cli("docs", "-o", str(tmp_path / "file" / "site"))
    assert run.status == 2 and len(run.err.strip().splitlines()) == 1 and "Not a directory" in run.err


@pytest.mark.parametrize("signum,status", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_stopping_docs_midway_leaves_no_example_folder(process, tmp_path, signum, status):
    """The tutorial examples run in a temporary folder (and a child process for the torch steps); stopped midway, archcalc
    exits with os._exit, which runs no finalizer, so the folder must be removed by the handler itself."""
    temp = tmp_path / "tmp"
    temp.mkdir()
    env = {**os.environ, "TMPDIR": str(temp), "PYTHONPATH": str(ROOT)}
    proc = process.popen(["-m", "archcalc", "docs", "-o", str(tmp_path / "site")], env=env,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 300
        while not list(temp.glob("archcalc-docs-*")) and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert list(temp.glob("archcalc-docs-*")), "archcalc docs made no example folder to interrupt"
        proc.send_signal(signum)
        assert proc.wait(timeout=120) == status
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.stderr.read().strip().splitlines()[-1] in ("archcalc: interrupted", "archcalc: terminated")
    assert list(temp.iterdir()) == []


def test_a_child_started_for_no_commands_is_stopped_and_leaves_nothing(tmp_path, monkeypatch):
    """A second build in one process finds every example run already: the child started for the torch commands gets
    none, and it must go with its folder then (not at the process's exit, leaving the folder)."""
    import tempfile

    from archcalc.cli import build_parser, main
    from archcalc.site import examples

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # the child's working folder goes here
    examples.start(examples.Program(build_parser, main, "archcalc.cli.docs_child"))
    child = examples._STARTED[0]
    assert [p.name for p in tmp_path.iterdir()] == [Path(child.home).name]
    monkeypatch.setattr(examples, "_PENDING", {})  # nothing prefetched: no torch command to give it
    examples.launch()
    assert child.process.poll() is not None and not examples._STARTED
    assert list(tmp_path.iterdir()) == []



def _program():
    from archcalc.cli import build_parser, main
    from archcalc.site import examples

    return examples.Program(build_parser, main, "archcalc.cli.docs_child")


@pytest.mark.parametrize("moment", ["folder made", "child starting"])
@pytest.mark.parametrize("maker", ["child", "script"])
def test_a_stop_at_any_moment_of_a_start_leaves_nothing(tmp_path, monkeypatch, moment, maker):
    """Ctrl-C or SIGTERM may come just after the OS made an example folder, or while the child process is being
    started (``subprocess.Popen`` is Python code, so the handler runs in the middle of it). The handler undoes what
    is registered and exits: the folder must be registered by then."""
    import tempfile

    from archcalc import cleanup
    from archcalc.site import examples

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    for name, empty in (("_CACHE", {}), ("_PENDING", {}), ("_STARTED", [])):  # this test's scripts alone
        monkeypatch.setattr(examples, name, empty)

    def stopped(*args):  # what the signal handler does there
        cleanup.undo_all()
        raise KeyboardInterrupt  # (the handler then exits the process)

    if moment == "folder made":
        made = os.mkdir
        monkeypatch.setattr(os, "mkdir", lambda *args: (made(*args), stopped()))
    else:
        monkeypatch.setattr(examples, "_start_child", lambda child, home: stopped() if Path(home).is_dir() else None)
    with pytest.raises(KeyboardInterrupt):
        if maker == "child":
            examples._Child(_program())
        else:
            examples.prefetch((examples.Run(("specs",)), examples.Run(("verify", "gpt2"), torch=True)), _program())
            examples.launch()
    assert list(tmp_path.iterdir()) == []
