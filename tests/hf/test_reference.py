"""Every reference config (tests/data/hf-reference, copied from the shared reference folder) counts to transformers'
figure through the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

REF = Path(__file__).resolve().parent.parent / "data" / "hf-reference"
COUNTS = json.loads((REF / "counts.json").read_text())


@pytest.mark.parametrize("name", sorted(COUNTS))
def test_reference_config_counts_exactly(cli, name):
    run = cli("count", "--hf", str(REF / f"{name}.json"), "--json")
    assert run.status == 0, run.err
    (result,) = run.json()["results"]
    assert result["total"] == COUNTS[name]
    assert isinstance(result["total"], int) and isinstance(result["active"], int)
    assert sum(result["by_role"].values()) == result["total"]


def test_gpt_oss_20b_active_parameters(cli):
    run = cli("count", "--hf", str(REF / "gpt-oss-20b.json"), "--json")
    (result,) = run.json()["results"]
    assert result["active"] == 3_608_307_264
    assert result["total"] == 20_914_757_184


def test_size_is_named_after_the_file_and_title_names_the_type(cli):
    payload = cli("count", "--hf", str(REF / "llama-2-7b.json"), "--json").json()
    assert payload["results"][0]["size"] == "llama-2-7b"
    assert "llama-2-7b.json" in payload["title"] and "llama" in payload["source"]
    assert payload["results"][0]["values"]["d_head"] == 128
