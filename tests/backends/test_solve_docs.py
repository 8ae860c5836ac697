"""docs/solve.md shows real output: every command on the page prints exactly what the page says."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

PAGE = Path(__file__).resolve().parents[2] / "docs" / "solve.md"
BLOCKS = re.findall(r"```console\n\$ (archcalc [^\n]+)\n(.*?)\n```", PAGE.read_text(encoding="utf-8"), re.S)


def test_the_page_has_the_walkthrough():
    commands = [c for c, _ in BLOCKS]
    assert len(commands) >= 10
    for needle in ("llama --target-params 7B", "llama --target-params 70B", "mixtral --target-params 1T",
                   "gpt3 --target-params 100T"):
        assert any(needle in c for c in commands), needle


@pytest.mark.parametrize("command,shown", BLOCKS, ids=[c[len("archcalc solve "):][:60] for c, _ in BLOCKS])
def test_each_command_prints_what_the_page_shows(cli, command, shown):
    r = cli(*shlex.split(command)[1:])
    printed = (r.out if r.status == 0 else r.err).rstrip("\n")
    assert printed == shown
