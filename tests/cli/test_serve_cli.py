"""archcalc serve on the command line: the worked example of docs/inference.md is today's output, the JSON is exact,
bad input is one line."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[2] / "docs" / "inference.md"


def test_the_docs_example_is_the_commands_output(cli):
    text = DOC.read_text(encoding="utf-8")
    block = re.search(r"```\n\$ (archcalc serve [^\n]+)\n(.*?)```", text, re.S)
    assert block, "docs/inference.md has no archcalc serve example"
    run = cli(*shlex.split(block.group(1))[1:])
    assert run.status == 0 and run.out == block.group(2)


def test_json_is_exact_and_agrees_with_itself(cli):
    data = json.loads(cli("serve", "llama", "--size", "3-8b", "--hardware", "h100", "--context", "8192", "--json").out)
    assert data["kv_bytes_per_token"] == 131_072 and data["block_bytes"] == 16 * 131_072
    assert data["kv_blocks"] == data["kv_budget_bytes"] // data["block_bytes"]
    (row,) = data["contexts"]
    assert row["sequences"] == data["kv_budget_bytes"] // row["bytes_per_sequence"]


def test_compare_ranks_formats_and_tp(cli):
    data = json.loads(cli("serve", "llama", "--size", "3-70b", "--hardware", "h100", "--context", "8192", "--compare",
                          "--json").out)
    by_format = {c["format"]: c for c in data["compare"]["formats"]}
    assert by_format["(none)"]["sequences"] == 0 and by_format["nvfp4"]["sequences"] > 0  # 141 GB of bf16 weights
    assert [c["tp"] for c in data["compare"]["tensor_parallel"]] == [1, 2, 4, 8]


def test_a_model_that_does_not_fit_says_so(cli):
    run = cli("serve", "llama", "--size", "3.1-405b", "--hardware", "h100")
    assert run.status == 0 and "nothing fits" in run.out


@pytest.mark.parametrize(("extra", "said"), [
    (("--gpu-memory-utilization", "1.5"), "at most 1"),
    (("--weights-format", "fp3"), "expected one of nvfp4"),
    (("--tp", "3"), "--tp 3 does not divide the 8 key/value heads"),
    (("--reserve", "x"), "--reserve 'x'"),
])
def test_bad_input_is_one_line(cli, extra, said):
    run = cli("serve", "llama", "--size", "3-8b", "--hardware", "h100", *extra)
    assert run.status == 2 and len(run.err.strip().splitlines()) == 1 and said in run.err, run.err


def test_latency_and_prefix_in_the_report_and_json(cli):
    args = ("serve", "llama", "--size", "2-7b", "--hardware", "a100-80gb", "--context", "640", "--prompt", "512",
            "--output", "128", "--concurrency", "16", "--shared-prefix", "256")
    run = cli(*args)
    assert "time to first token" in run.out and "never turns compute-bound" in run.out
    data = json.loads(cli(*args, "--json").out)
    assert data["latency"]["compute_bound_batch"] is None and data["latency"]["sequences"] == 16
    assert data["shared_prefix"] == 256


def test_prompt_without_output_is_refused(cli):
    run = cli("serve", "llama", "--size", "3-8b", "--hardware", "h100", "--prompt", "512")
    assert run.status == 2 and "--prompt and --output go together" in run.err


DRAFTED = ("serve", "llama", "--size", "3-70b", "--hardware", "h100", "--tp", "4", "--context", "4096", "--prompt", "1024",
           "--output", "256", "--concurrency", "16")


def test_a_draft_model_speeds_up_decode_by_the_stated_rule(cli):
    """Llama 3 8B drafting 4 tokens for Llama 3 70B at acceptance 0.8: (1 - 0.8^5) / 0.2 tokens a target step; the
    bound is that times the plain step over one verify step and four draft steps; the draft's weights and KV cache
    leave fewer sequences room."""
    from fractions import Fraction

    alone = json.loads(cli(*DRAFTED, "--json").out)
    data = json.loads(cli(*DRAFTED, "--draft", "llama", "--draft-size", "3-8b", "--draft-tokens", "4",
                          "--acceptance", "0.8", "--json").out)
    s = data["speculative"]
    expected = (1 - Fraction(4, 5) ** 5) / (1 - Fraction(4, 5))
    assert Fraction(s["expected_tokens_per_target_step"]) == expected
    plain, verify, draft = (Fraction(s[k]["seconds"]) for k in ("plain_step", "verify_step", "draft_step"))
    assert Fraction(s["speedup_bound"]) == expected * plain / (verify + 4 * draft) and s["speedup_bound_float"] > 1
    assert data["contexts"][0]["sequences"] < alone["contexts"][0]["sequences"]


def test_a_draft_with_another_vocabulary_is_refused(cli):
    run = cli(*DRAFTED, "--draft", "llama", "--draft-size", "2-7b")
    assert run.status == 2 and "its vocabulary (32,000) is not the target's (128,256)" in run.err
