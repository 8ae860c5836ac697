"""What a writer may replace without --force (issue 26): only a file archcalc wrote and nobody changed since. Its
marker carries the hash of what archcalc wrote (archcalc/cli/output.py: stamp, replaceable); a file that merely
contains the marker (a checkpoint's config.json that transformers saved after loading an exported one, notes
quoting the key, a copied header line), an edited file, and a file from an archcalc that wrote no hash are refused
in one line naming --force. For every writer: generate, import-hf, export-hf (and archcalc docs, see below)."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from archcalc.cli.output import replaceable, stamp, write_output
from archcalc.codegen.emit import MARKER as PY_MARKER
from archcalc.errors import UsageError
from archcalc.hf import YAML_MARKER
from archcalc.hf.export import FILE_MARKER

HF = Path(__file__).resolve().parents[1] / "data" / "hf"

# writer: (argv without -o for a first file, argv for a different second file, the marker as the file holds it)
WRITERS = {
    "generate": (["generate", "gpt2", "--size", "small", "--set", "L=1"], ["generate", "gpt2", "--size", "small", "--set", "L=2"],
                 PY_MARKER),
    "import-hf": (["import-hf", str(HF / "llama-3.1-8b.json")], ["import-hf", str(HF / "gpt2-hub.json")], YAML_MARKER),
    "export-hf": (["export-hf", "gpt2", "--size", "small"], ["export-hf", "gpt2", "--size", "medium"], FILE_MARKER),
}


def refused(run, target: Path, before: bytes, *words: str) -> str:
    """Exit 2, one line naming the file and --force (and ``words``), the file as it was."""
    assert run.status == 2 and run.out == "" and run.err.count("\n") == 1, run.err
    message = run.err.strip()
    assert message.startswith(f"{target}: ") and "--force" in message and all(w in message for w in words), message
    assert target.read_bytes() == before
    return message


def written(cli, argv: list[str], target: Path, *extra: str) -> str:
    run = cli(*argv, "-o", str(target), *extra)
    assert run.status == 0, run.err
    return target.read_text(encoding="utf-8")


@pytest.mark.parametrize("writer", WRITERS)
def test_an_unedited_file_is_replaced_an_edited_one_is_refused(cli, tmp_path, writer):
    first, second, marker = WRITERS[writer]
    target = tmp_path / "out.file"
    text = written(cli, first, target)
    assert re.search(re.escape(marker) + " sha256:[0-9a-f]{32}[^0-9a-f]", text), text[:300]
    assert replaceable(target, marker, "x") is None
    again = written(cli, second, target)  # unedited: replaced, no --force
    assert again != text and marker in again
    for edit in (again + "# one more line\n", again[:-2] + ("x" if again[-2] != "x" else "y") + "\n", again[:-1]):
        target.write_text(edit, encoding="utf-8")
        before = target.read_bytes()
        refused(cli(*first, "-o", str(target)), target, before, "edited since")
    assert written(cli, first, target, "--force") == text  # --force replaces it, with a fresh hash
    assert written(cli, second, target) == again


@pytest.mark.parametrize("writer", WRITERS)
def test_a_file_that_only_quotes_the_marker_is_refused(cli, tmp_path, writer):
    first, _, marker = WRITERS[writer]
    real = written(cli, first, tmp_path / "real.file")
    header = next(line for line in real.splitlines() if marker in line)
    for i, text in enumerate([
        f"my notes: archcalc marks its files with {marker!r}\n",  # the marker, no hash
        f"notes: a file archcalc wrote starts\n{header}\nand so on\n",  # a whole header line, hash included
        f"{header}\n",  # the header alone: the hash is of another content
    ]):
        target = tmp_path / f"notes{i}.txt"
        target.write_text(text, encoding="utf-8")
        refused(cli(*first, "-o", str(target)), target, target.read_bytes())


@pytest.mark.parametrize("writer", WRITERS)
def test_a_file_from_an_archcalc_that_wrote_no_hash_needs_force(cli, tmp_path, writer):
    first, _, marker = WRITERS[writer]
    target = tmp_path / "old.file"
    new = written(cli, first, target)
    m = re.search(re.escape(marker) + " sha256:[0-9a-f]{32}", new)
    old = new[:m.start()] + marker + new[m.end():]  # as an archcalc before the hash wrote it
    target.write_text(old, encoding="utf-8")
    refused(cli(*first, "-o", str(target)), target, old.encode(), "no content hash", "cannot tell whether it was edited")
    assert written(cli, first, target, "--force") == new


def test_a_checkpoint_config_that_transformers_saved_is_refused(cli, tmp_path):
    """The reproducer: export, load with transformers, save the checkpoint's config; export-hf must not replace it."""
    transformers = pytest.importorskip("transformers")
    target = tmp_path / "config.json"
    written(cli, ["export-hf", "gpt2", "--size", "small"], target)
    config = transformers.AutoConfig.from_pretrained(str(tmp_path))
    config.save_pretrained(str(tmp_path))
    saved = target.read_bytes()
    assert b'"archcalc_exported"' in saved  # transformers kept the key, hash and all
    refused(cli("export-hf", "gpt2", "--size", "small", "-o", str(target)), target, saved, "edited since")


def test_a_checkpoint_config_resaved_by_any_json_tool_is_refused(cli, tmp_path):
    """The same without transformers: the keys sorted and two added, as save_pretrained writes them."""
    target = tmp_path / "config.json"
    data = json.loads(written(cli, ["export-hf", "gpt2", "--size", "small"], target))
    target.write_text(json.dumps({**data, "transformers_version": "5.0.0", "dtype": "float32"}, indent=2, sort_keys=True) + "\n")
    refused(cli("export-hf", "gpt2", "--size", "small", "-o", str(target)), target, target.read_bytes(), "edited since")


def test_import_hf_prints_what_it_writes_so_a_redirected_spec_is_its_own(cli, tmp_path):
    printed = cli("import-hf", str(HF / "llama-3.1-8b.json"))
    assert printed.status == 0 and printed.out.startswith(YAML_MARKER + " sha256:")
    target = tmp_path / "spec.yaml"
    target.write_text(printed.out, encoding="utf-8")
    assert written(cli, ["import-hf", str(HF / "gpt2-hub.json")], target).startswith(YAML_MARKER)  # replaced: unedited
    assert cli("count", str(target)).status == 0  # the stamped header is a comment: the spec still loads


# -- the writer's functions: the hash, its place, its bounds ---------------------------------------------------------


def test_the_stamp_follows_the_first_marker_and_covers_everything_else():
    text = "head\n# MARK rest\nbody # MARK again\n"
    stamped = stamp(text, "MARK")
    assert stamped.startswith("head\n# MARK sha256:") and stamped.count("sha256:") == 1
    assert stamped.replace(stamped[stamped.index(" sha256:"):][:40], "", 1) == text
    assert stamp(stamped, "MARK") == stamped  # idempotent: a printed, stamped text is written as it is
    with pytest.raises(ValueError, match="not in the first"):
        stamp("no marker here\n", "MARK")


def test_a_normalized_hash_ignores_what_the_writer_masks_and_nothing_else(tmp_path):
    """For a writer whose output varies by machine (the docs' timings): the hash covers the text as ``normalize``
    gives it, so the same page with other timings carries the same stamp, and an edit elsewhere is still one."""
    def mask(text: str) -> str:
        return re.sub(r"<v>.*?</v>", "<v>#</v>", text)

    here, there = "# MARK\nrun took <v>1.5 s</v>\n", "# MARK\nrun took <v>2.25 s</v>\n"
    assert stamp(here, "MARK", mask).splitlines()[0] == stamp(there, "MARK", mask).splitlines()[0]
    assert stamp(here, "MARK").splitlines()[0] != stamp(there, "MARK").splitlines()[0]
    target = tmp_path / "page.md"
    write_output(target, here, "MARK", False, "written by archcalc", hashed=True, normalize=mask)
    target.write_text(target.read_text().replace("1.5", "9.75"))
    assert replaceable(target, "MARK", "written by archcalc", normalize=mask) is None
    assert "edited since" in replaceable(target, "MARK", "written by archcalc")  # without the mask: a change
    target.write_text(target.read_text() + "my paragraph\n")
    assert "edited since" in replaceable(target, "MARK", "written by archcalc", normalize=mask)


def test_replaceable_reads_a_bounded_part_of_a_huge_file(tmp_path):
    """A stamped header on a 65 MiB file (sparse: nothing is written past the header) is not archcalc's; its
    content is never hashed (that would read it all)."""
    target = tmp_path / "huge"
    target.write_text(stamp("# MARK\n", "MARK"))
    os.truncate(target, 65 << 20)
    assert "larger than anything archcalc writes" in replaceable(target, "MARK", "written by archcalc")


def test_a_fifo_is_never_opened_for_its_marker(tmp_path):
    """replaceable() on a FIFO answers at once (no blocking open), and the writer refuses it even with --force."""
    fifo = tmp_path / "f"
    os.mkfifo(fifo)
    assert "not a regular file" in replaceable(fifo, "MARK", "written by archcalc")
    with pytest.raises(UsageError, match="FIFO"):
        write_output(fifo, "# MARK\n", "MARK", True, "written by archcalc")


def test_a_hash_of_the_wrong_length_or_case_is_no_hash(tmp_path):
    target = tmp_path / "f.py"
    good = stamp("# MARK\nx = 1\n", "MARK")
    for bad in (good.replace("sha256:", "sha256:0", 1), good.upper().replace("# MARK SHA256:", "# MARK sha256:")):
        target.write_text(bad)
        assert "no content hash" in replaceable(target, "MARK", "written by archcalc")
    target.write_text(good)
    assert replaceable(target, "MARK", "written by archcalc") is None


# -- archcalc docs: the marker alone, until the site stamps its own pages ---------------------------------------------


@pytest.fixture
def two_page_site(monkeypatch):
    import archcalc.site
    from archcalc.site.project import MARKER

    pages = {"version": 1}

    def render_all(root: Path, program) -> dict[Path, str]:
        return {root / "mkdocs.yml": f"# {MARKER}\nsite_name: x\n",
                root / "docs" / "index.md": f"<!-- {MARKER} -->\n# Home, version {pages['version']}\n"}

    monkeypatch.setattr(archcalc.site, "render_all", render_all)
    return pages


def test_docs_replaces_its_unedited_pages_and_refuses_a_quoting_file(cli, tmp_path, two_page_site):
    from archcalc.site.project import MARKER

    assert cli("docs", "-o", str(tmp_path)).status == 0
    two_page_site["version"] = 2
    assert cli("docs", "-o", str(tmp_path)).status == 0
    assert "version 2" in (tmp_path / "docs" / "index.md").read_text()
    index = tmp_path / "docs" / "index.md"
    index.write_text("# my home page\n\n" + "x" * 5000 + f"\n(archcalc marks its pages '{MARKER}')\n")
    two_page_site["version"] = 3
    run = cli("docs", "-o", str(tmp_path))
    assert run.status == 2 and "--force" in run.err and "my home page" in index.read_text()


def test_docs_refuses_an_edited_page(cli, tmp_path, two_page_site):
    assert cli("docs", "-o", str(tmp_path)).status == 0
    index = tmp_path / "docs" / "index.md"
    index.write_text(index.read_text() + "\nmy own paragraph\n")
    two_page_site["version"] = 2
    run = cli("docs", "-o", str(tmp_path))
    assert run.status == 2 and "--force" in run.err and "my own paragraph" in index.read_text()


def test_docs_refuses_a_page_that_quotes_the_marker_near_its_top(cli, tmp_path, two_page_site):
    from archcalc.site.project import MARKER

    index = tmp_path / "docs" / "index.md"
    index.parent.mkdir(parents=True)
    index.write_text(f"# my home page\n\narchcalc marks its pages '{MARKER}'.\n")
    run = cli("docs", "-o", str(tmp_path))
    assert run.status == 2 and "--force" in run.err and "my home page" in index.read_text()
