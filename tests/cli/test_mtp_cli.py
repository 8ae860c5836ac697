"""``--with-mtp`` / ``--mtp-copies`` on count, flops, memory (the MTP modules join the figures under the role ``mtp``)
and infer's ``--mtp-draft K --mtp-acceptance ALPHA`` (speculative decoding with the MTP module as the draft)."""

from __future__ import annotations

import json
from fractions import Fraction

import pytest

from tests.helpers import DATA

INFER = ("infer", "deepseek_v3", "--hardware", "h200", "--tp", "8", "--weights-dtype", "fp8", "--batch", "16",
         "--prompt", "512", "--new-tokens", "64")


def _result(r):
    assert r.status == 0, r.err
    return r.json()["results"][0]


def test_count_switches(cli):
    plain = _result(cli("count", "deepseek_v3", "--json"))
    shared = _result(cli("count", "deepseek_v3", "--with-mtp", "--json"))
    stored = _result(cli("count", "deepseek_v3", "--mtp-copies", "--json"))
    assert "mtp" not in plain["by_role"]
    assert [w for w in shared["warnings"] if "multi-token prediction" in w]
    assert not [w for w in plain["warnings"] if "multi-token prediction" in w]
    assert shared["total"] == plain["total"] + shared["by_role"]["mtp"] == sum(shared["by_path"].values())
    tied = {t["path"]: t.get("tied_to") for t in shared["tensors"] if t["role"] == "mtp"}
    assert tied["mtp.embed.weight"] == "embed.token.weight" and tied["mtp.head.weight"] == "head.weight"
    v = plain["values"]
    assert stored["by_role"]["mtp"] - shared["by_role"]["mtp"] == 2 * v["V"] * v["d"]
    assert "mtp" in cli("count", "deepseek_v3", "--with-mtp").out  # the terminal table has the row


def test_hf_config_reads_the_number_of_modules(cli, tmp_path):
    data = json.loads((DATA / "hf" / "deepseek-v3.json").read_text())
    one = _result(cli("count", "--hf", str(DATA / "hf" / "deepseek-v3.json"), "--with-mtp", "--json"))
    data["num_nextn_predict_layers"] = 2
    path = tmp_path / "config.json"
    path.write_text(json.dumps(data))
    two = _result(cli("count", "--hf", str(path), "--with-mtp", "--json"))
    assert two["by_role"]["mtp"] == 2 * one["by_role"]["mtp"]
    assert _result(cli("count", "--hf", str(path), "--json"))["total"] == one["total"] - one["by_role"]["mtp"]


def test_flops_and_memory_take_the_switch(cli):
    f0 = _result(cli("flops", "deepseek_v3", "--seq-len", "256", "--json"))
    f1 = _result(cli("flops", "deepseek_v3", "--seq-len", "256", "--with-mtp", "--json"))
    assert f1["forward_matmul"] - f0["forward_matmul"] == f1["by_role"]["mtp"] > 0
    m1 = _result(cli("memory", "deepseek_v3", "--seq-len", "256", "--batch", "1", "--with-mtp", "--json"))
    assert m1["training"]["states_bytes"] == 16 * _result(cli("count", "deepseek_v3", "--with-mtp", "--json"))["total"]


@pytest.mark.parametrize("argv", [("count", "llama", "--with-mtp"), ("flops", "gpt2", "--seq-len", "8", "--mtp-copies")])
def test_a_spec_without_modules_is_refused(cli, argv):
    r = cli(*argv)
    assert r.status == 2 and "no multi-token prediction modules" in r.err and len(r.err.strip().splitlines()) == 1


def test_speculative_bounds(cli):
    base = _result(cli(*INFER, "--json"))
    for k, alpha in ((1, Fraction(17, 20)), (3, Fraction(7, 8))):
        r = _result(cli(*INFER, "--mtp-draft", str(k), "--mtp-acceptance", str(alpha), "--json"))
        assert {key: r[key] for key in base} == base  # nothing else changes
        s = r["speculative"]
        tokens = Fraction(s["expected_tokens_per_target_step"])
        assert tokens == sum(alpha**i for i in range(k + 1))  # 1 + a + ... + a^k
        plain, verify, draft = (Fraction(s[f"{step}_step"]["seconds"]) for step in ("plain", "verify", "draft"))
        assert Fraction(s["speedup_bound"]) == tokens * plain / (verify + k * draft)
        assert s["modules_reused"] == (k > s["mtp_modules"]) and s["mtp_modules"] == 1
        assert s["verify_step"]["flops"] == (k + 1) * s["plain_step"]["flops"]
        assert s["plain_step"]["bytes"] <= s["verify_step"]["bytes"] and 0 < draft < plain
    none = _result(cli(*INFER, "--mtp-draft", "2", "--mtp-acceptance", "0", "--json"))["speculative"]
    assert Fraction(none["speedup_bound"]) < 1  # nothing accepted: the drafts only cost
    text = cli(*INFER, "--mtp-draft", "2", "--mtp-acceptance", "3/4")
    assert text.status == 0 and "speed-up bound" in text.out and "37/16" in text.out


@pytest.mark.parametrize("extra, expected", [
    (("--mtp-draft", "1", "--mtp-acceptance", "1"), "[0, 1)"),
    (("--mtp-draft", "1", "--mtp-acceptance", "-0.1"), "[0, 1)"),
    (("--mtp-draft", "1", "--mtp-acceptance", "much"), "expected a number"),
    (("--mtp-draft", "0", "--mtp-acceptance", "0.5"), "--mtp-draft"),
    (("--mtp-draft", "2",), "go together"),
])
def test_speculative_input_errors(cli, extra, expected):
    r = cli(*INFER, *extra)
    assert r.status == 2 and expected in r.err and len(r.err.strip().splitlines()) == 1


def test_speculative_needs_modules(cli):
    r = cli("infer", "llama", "--size", "2-7b", "--hardware", "h100", "--batch", "1", "--prompt", "8", "--new-tokens", "4",
            "--mtp-draft", "1", "--mtp-acceptance", "0.5")
    assert r.status == 2 and "no multi-token prediction modules" in r.err
    r = cli(*INFER, "--set", "N_mtp=0", "--mtp-draft", "1", "--mtp-acceptance", "0.5")
    assert r.status == 2 and "no MTP module" in r.err
