"""``archcalc count --hf CONFIG.json --with-vision``: the vision tower and projector join the count, in the terminal
and in ``--json``; the whole count equals transformers' ...ForConditionalGeneration; a config without a modelled
vision tower is refused in one line."""

from __future__ import annotations

import json

import pytest

from tests.helpers import DATA, meta_count

QWEN = str(DATA / "hf" / "qwen3.5-4b.json")  # a genuine wrapper config: Qwen3.5's


def test_json_adds_the_vision_parts_to_the_total(cli):
    plain = cli("count", "--hf", QWEN, "--json")
    r = cli("count", "--hf", QWEN, "--with-vision", "--json")
    assert r.status == 0 and plain.status == 0
    before, after = plain.json()["results"][0], r.json()["results"][0]
    vision = after["vision"]
    assert after["text_total"] == before["total"]
    assert after["total"] == before["total"] + after["by_role"]["vision_tower"] + after["by_role"]["projector"]
    assert vision["vision_tower"] == after["by_role"]["vision_tower"] and vision["total"] == vision["vision_tower"] + vision["projector"]
    assert sum(after["by_path"].values()) == after["total"]
    assert {t["role"] for t in after["tensors"]} >= {"vision_tower", "projector"}
    assert after["active"] == before["active"]  # one text token uses no vision parameter
    assert all(type(after[k]) is int for k in ("total", "text_total"))
    # the oracle: the whole multimodal model as transformers builds it
    data = json.loads((DATA / "hf" / "qwen3.5-4b.json").read_text())
    transformers = pytest.importorskip("transformers")
    assert after["total"] == meta_count(transformers.Qwen3_5Config.from_dict(data), "Qwen3_5ForConditionalGeneration")


def test_without_the_flag_nothing_changes(cli):
    r = cli("count", "--hf", QWEN, "--json")
    result = r.json()["results"][0]
    assert "vision" not in result and "text_total" not in result
    assert not {"vision_tower", "projector"} & set(result["by_role"])
    assert "the rest (a vision tower, its projector) is not counted" in r.err


def test_terminal_lists_the_parts_and_their_tensors(cli):
    total = cli("count", "--hf", QWEN, "--with-vision", "--json").json()["results"][0]["total"]
    r = cli("count", "--hf", QWEN, "--with-vision")
    assert r.status == 0 and "is not counted" not in r.err
    roles = {line.split()[0]: line.split()[1] for line in r.out.splitlines() if line.split()[:1] in (["vision_tower"], ["projector"])}
    assert set(roles) == {"vision_tower", "projector"}
    assert f"{total:,}" in r.out
    assert "visual.merger.linear_fc1.weight" in r.out and "visual.blocks.attn.qkv.weight" in r.out


@pytest.mark.parametrize("argv, message", [
    (["--hf", str(DATA / "hf" / "llama-3.1-8b.json")], "has no text_config: a text model"),
    (["--hf", str(DATA / "hf" / "kimi-k2.6.json")], "model_type: 'kimi_k25': its vision tower is not modelled"),
    (["gpt2"], "--with-vision needs --hf CONFIG.json"),
])
def test_refused_in_one_line(cli, argv, message):
    r = cli("count", *argv, "--with-vision")
    assert r.status == 2 and r.out == ""
    assert message in r.err and len(r.err.strip().splitlines()) == 1 and "Traceback" not in r.err
