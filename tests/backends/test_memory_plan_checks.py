"""archcalc memory's parallel-plan flags in combination: what contradicts itself or the model is refused in one line
(exit 2); what changes nothing is said in one note line, and changes nothing indeed; the plan is described in words
with only the degrees it uses (and "1 micro-batch", not "1 micro-batches")."""

from __future__ import annotations

import pytest

DENSE = ["llama", "--size", "3-8b", "--set", "V=128", "--set", "L=4", "--set", "d=64", "--set", "H=4", "--set", "KV=2",
         "--set", "d_ff=128"]
MOE = ["mixtral", "--size", "8x7b", "--set", "V=64", "--set", "L=2", "--set", "d=32", "--set", "H=4", "--set", "KV=2",
       "--set", "d_ff=16", "--set", "E=8", "--set", "K=2"]
RUN = ["--seq-len", "16", "--batch", "8"]

OK, NOTE, REFUSED = "ok", "note", "refused"

# (model, flags, outcome, what the message or the plan's description says, the flags it amounts to for a note)
CASES = [
    (DENSE, [], OK, "", None),
    (DENSE, ["--dp", "4", "--zero", "3"], OK, "data parallel 4 (ZeRO 3)", None),
    (DENSE, ["--dp", "4", "--zero", "3", "--padded"], OK, "data parallel 4 (ZeRO 3)", None),
    (DENSE, ["--dp", "4"], OK, "data parallel 4;", None),
    (DENSE, ["--tp", "2", "--sp"], OK, "tensor parallel 2 + sequence parallel", None),
    (DENSE, ["--pp", "2", "--microbatches", "4"], OK, "pipeline 2 (4 micro-batches of 2 sequences)", None),
    (DENSE, ["--pp", "2"], OK, "pipeline 2 (1 micro-batch of 8 sequences)", None),
    (DENSE, ["--pp", "2", "--microbatches", "8"], OK, "pipeline 2 (8 micro-batches of 1 sequence)", None),
    (DENSE, ["--microbatches", "4"], OK, "gradient accumulation (4 micro-batches of 2 sequences)", None),
    (DENSE, ["--cp", "16"], OK, "context parallel 16", None),
    (DENSE, ["--precision", "fp32"], OK, "no parallelism (one GPU); fp32 precision", None),
    (MOE, ["--dp", "8", "--ep", "8"], OK, "data parallel 8, expert parallel 8", None),
    (MOE, ["--dp", "4", "--ep", "2", "--zero", "2"], OK, "data parallel 4 (ZeRO 2), expert parallel 2", None),
    # harmless: said, and the figures are those without the flag
    (DENSE, ["--zero", "3"], NOTE, "--zero 3 has no effect with --dp 1", []),
    (DENSE, ["--zero", "1", "--tp", "2"], NOTE, "--zero 1 has no effect with --dp 1", ["--tp", "2"]),
    (DENSE, ["--padded"], NOTE, "--padded has no effect without --zero 3 and --dp > 1", []),
    (DENSE, ["--dp", "2", "--zero", "2", "--padded"], NOTE, "--padded has no effect", ["--dp", "2", "--zero", "2"]),
    (DENSE, ["--dp", "2", "--ep", "2"], NOTE, "--ep 2 has no effect: the model has no routed experts", ["--dp", "2"]),
    # contradictions: one line, exit 2
    (DENSE, ["--sp"], REFUSED, "--sp: sequence parallelism splits activations over the tensor-parallel ranks", None),
    (DENSE, ["--ep", "2"], REFUSED, "--ep 2 must divide --dp 1", None),
    (MOE, ["--dp", "6", "--ep", "4"], REFUSED, "--ep 4 must divide --dp 6", None),
    (MOE, ["--dp", "16", "--ep", "16"], REFUSED, "--ep 16: more expert-parallel ranks than the 8 routed experts", None),
    (DENSE, ["--cp", "17"], REFUSED, "--cp 17: more context-parallel ranks than the 16 tokens", None),
    (DENSE, ["--pp", "5"], REFUSED, "--pp 5: more pipeline stages than the model's 4 blocks", None),
    (DENSE, ["--microbatches", "3"], REFUSED, "--microbatches 3 does not divide --batch 8", None),
    (DENSE, ["--tp", "3"], REFUSED, "--tp 3", None),
    (DENSE, ["--zero", "4"], REFUSED, "--zero", None),
    (DENSE, ["--precision", "fp8"], REFUSED, "--precision", None),
]


@pytest.mark.parametrize("model, flags, outcome, says, same_as", CASES, ids=[" ".join(c[1]) or "none" for c in CASES])
def test_every_flag_combination_is_done_said_or_refused(cli, model, flags, outcome, says, same_as):
    text = cli("memory", *model, *RUN, *flags)
    if outcome == REFUSED:
        assert text.status == 2 and says in text.err and len(text.err.strip().splitlines()) == 1, text.err
        return
    assert text.status == 0, text.err
    notes = text.err.strip().splitlines()
    if outcome == NOTE:
        assert len(notes) == 1 and notes[0].startswith("note: ") and says in notes[0], text.err
    else:
        assert notes == [] and (says in text.out if says else "per GPU" not in text.out), (text.out, text.err)
    assert "micro-batches of 1 sequences" not in text.out and "1 micro-batches" not in text.out
    data = cli("memory", *model, *RUN, *flags, "--json")
    parallel = data.json()["results"][0]["parallel"]
    assert parallel["notes"] == [n.removeprefix("note: ") for n in notes]
    if same_as is not None:  # a flag with no effect: the figures without it
        alone = cli("memory", *model, *RUN, *same_as, "--json").json()["results"][0]["parallel"]
        assert parallel["per_gpu"] == alone["per_gpu"]


def test_a_note_is_said_once_for_every_size(cli):
    run = cli("memory", "llama", "--size", "3-8b", "--size", "2-7b", "--seq-len", "16", "--batch", "1", "--zero", "2")
    assert run.status == 0 and run.err.count("note: --zero 2 has no effect") == 1, run.err
