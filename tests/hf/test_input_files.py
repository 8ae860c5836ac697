"""Only a regular file is read as a config (issue 26): a FIFO given to ``--hf`` or ``import-hf`` once opened the pipe
and waited for a writer forever. A FIFO, a directory or a device is refused in one line (exit 2) before it is opened,
on every command that reads a config, as a spec path already was.

The tests make opening the FIFO itself an error, so a regression fails at once instead of blocking the test run.
"""

from __future__ import annotations

import builtins
import json
import os
from pathlib import Path

import pytest

from archcalc.errors import SpecError
from archcalc.hf import spec_from_hf_file

pytestmark = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs named pipes (os.mkfifo)")

COMMANDS = [  # each command that takes a config (--hf in place of SPEC), with the options it needs
    ["count", "--hf", "{cfg}"],
    ["count", "--hf", "{cfg}", "--json"],
    ["flops", "--hf", "{cfg}", "--seq-len", "8"],
    ["memory", "--hf", "{cfg}", "--seq-len", "8", "--batch", "1"],
    ["infer", "--hf", "{cfg}", "--hardware", "h100", "--batch", "1", "--prompt", "8", "--new-tokens", "8"],
    ["solve", "--hf", "{cfg}", "--target-params", "1000000"],
    ["generate", "--hf", "{cfg}", "-o", "{out}"],
    ["verify", "--hf", "{cfg}"],
    ["import-hf", "{cfg}"],
    ["import-hf", "{cfg}", "-o", "{out}"],
]


class Opened(Exception):
    """Raised where archcalc opens the FIFO (it must not)."""


@pytest.fixture
def fifo(tmp_path, monkeypatch) -> Path:
    """A named pipe, config.json; opening it (by open() or os.open()) raises Opened instead of waiting for a writer."""
    path = tmp_path / "config.json"
    os.mkfifo(path)
    real_open, real_os_open = builtins.open, os.open

    def guard(target):
        if isinstance(target, (str, bytes, os.PathLike)) and Path(os.fsdecode(target)).resolve() == path.resolve():
            raise Opened(str(target))

    def checked_open(file, *args, **kwargs):
        guard(file)
        return real_open(file, *args, **kwargs)

    def checked_os_open(file, *args, **kwargs):
        guard(file)
        return real_os_open(file, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", checked_open)
    monkeypatch.setattr(os, "open", checked_os_open)
    return path


@pytest.mark.parametrize("argv", COMMANDS, ids=lambda a: " ".join(a[:2] + a[3:]))
def test_a_fifo_config_is_refused_before_it_is_opened(cli, tmp_path, fifo, argv):
    out = tmp_path / "out.txt"
    run = cli(*[a.format(cfg=fifo, out=out) for a in argv])
    message = run.err.strip()
    assert run.status == 2 and "\n" not in message and "Traceback" not in message, run.err
    assert message.startswith(f"{fifo}:1:1: ") and "FIFO" in message and "not a regular file" in message, message
    assert not out.exists()


def test_a_symbolic_link_to_a_fifo_is_refused_too(cli, tmp_path, fifo):
    link = tmp_path / "link.json"
    link.symlink_to(fifo)
    run = cli("count", "--hf", str(link))
    assert run.status == 2 and "FIFO" in run.err and run.err.startswith(f"{link}:1:1: "), run.err


def test_a_fifo_spec_is_refused_by_export_hf_and_count(cli, tmp_path, fifo):
    """A spec path (export-hf reads a spec, not a config) was already checked: the same one line, exit 2."""
    spec = tmp_path / "spec.yaml"
    os.mkfifo(spec)
    for argv in (["export-hf", str(spec), "-o", "-"], ["count", str(spec)]):
        run = cli(*argv)
        assert run.status == 2 and "not a regular file" in run.err and "\n" not in run.err.strip(), run.err


@pytest.mark.parametrize("kind", ["directory", "device"])
def test_other_files_that_are_not_regular_are_refused(cli, tmp_path, kind):
    if kind == "device" and not Path("/dev/zero").exists():
        pytest.skip("no /dev/zero")
    path = str(tmp_path) if kind == "directory" else "/dev/zero"  # /dev/zero would be read until the size limit
    run = cli("count", "--hf", path)
    assert run.status == 2 and f"is a {'directory' if kind == 'directory' else 'character device'}, not a regular file" \
        in run.err, run.err


def test_the_library_function_refuses_a_fifo_too(fifo):
    with pytest.raises(SpecError, match="FIFO"):
        spec_from_hf_file(fifo)


def test_a_regular_file_and_a_link_to_one_are_read(cli, tmp_path):
    config = tmp_path / "tiny.json"
    config.write_text(json.dumps({"model_type": "llama", "num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4,
                                  "intermediate_size": 96, "vocab_size": 100}))
    link = tmp_path / "link.json"
    link.symlink_to(config)
    for path in (config, link):
        run = cli("count", "--hf", str(path), "--json")
        assert run.status == 0 and run.json()["results"][0]["total"] == 82752, run.err
