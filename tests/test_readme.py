"""The README stays a short front door: under 900 words, the two set-up commands first (install and count; install
and test), and every command of its tour runs as printed (in-process, in a temporary folder)."""

from __future__ import annotations

import re
import shlex
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")
BLOCKS = re.findall(r"```bash\n(.*?)```", README, flags=re.S)


def _commands(block: str) -> list[str]:
    return [line.split("  #")[0].strip() for line in block.splitlines() if line.strip() and not line.startswith("#")]


TOUR = _commands(BLOCKS[1])


def test_the_readme_is_short_and_starts_with_the_two_set_up_commands():
    assert len(README.split()) < 900
    first = _commands(BLOCKS[0])
    assert README.index("```bash") < README.index("## ")  # before any section
    assert first == ["pip install . && archcalc count gpt3",
                     'pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu && pip install -e ".[dev,docs]" && python -m pytest -q']
    assert "python -m pytest -q" in (ROOT / ".ci" / "run").read_text()  # what CI runs is the README's test command


def test_the_tour_names_every_main_command():
    used = {shlex.split(c)[1] for c in TOUR}
    assert {"count", "flops", "memory", "infer", "solve", "generate", "verify", "run", "import-hf", "docs"} <= used


@pytest.mark.parametrize("command", [c for c in TOUR if not c.startswith("archcalc docs")])  # the site: tests/site
def test_every_tour_command_runs_as_printed(cli, tmp_path, monkeypatch, command):
    argv = shlex.split(command)[1:]
    if argv[0] in ("generate", "verify", "run"):
        pytest.importorskip("torch")
    monkeypatch.chdir(tmp_path)
    if argv[0] == "import-hf":
        shutil.copy(ROOT / "tests" / "data" / "hf" / "aya-23-8b.json", tmp_path / "config.json")
    run = cli(*argv)
    assert run.status == 0, run.err
    if "-o" in argv:
        assert (tmp_path / argv[argv.index("-o") + 1]).is_file()
    if argv[0] == "count":
        assert "124,439,808" in run.out and "L*(12*d**2 + 13*d) + T*d + V*d + 2*d" in run.out  # what the comment says
