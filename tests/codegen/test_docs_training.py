"""The training-and-generation example of docs/training.md runs as written (on a GPT-2 small made shallow, with a
smaller batch and fewer steps) and does what the page says: the loss falls, generate() gives prompt + 50 tokens."""

from __future__ import annotations

import re
from pathlib import Path

DOC = Path(__file__).resolve().parents[2] / "docs" / "training.md"


def test_the_example_on_the_training_page_runs(process, tmp_path):
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), flags=re.S)
    example = blocks[0]
    assert "model(tokens[:, :-1], targets=tokens[:, 1:])" in example and "model.generate(" in example
    shrunk = example.replace("(8, 257)", "(2, 33)").replace("range(100)", "range(3)")
    assert shrunk != example
    shrunk += "\nassert out.shape == (1, 66) and greedy.shape == (1, 66) and torch.equal(out[:, :16], prompt)\n"
    shrunk += "print(loss.item())\n"
    gen = process.run(["-m", "archcalc", "generate", "gpt2", "--size", "small", "--set", "L=2", "-o", str(tmp_path / "gpt2_small.py")])
    assert gen.returncode == 0, gen.stderr
    run = process.run(["-c", shrunk], cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert float(run.stdout.split()[-1]) < 10.9  # from about ln(50257) = 10.82, three steps on one batch


def test_the_memory_table_on_the_training_page_is_what_archcalc_memory_prints():
    """Each row of the per-GPU table equals `archcalc memory` for its plan (GiB, two decimals)."""
    from archcalc.backends.memory import memory
    from archcalc.backends.parallel_plan import Plan
    from archcalc.spec import load_spec
    from archcalc.spec.bind import bind

    text = DOC.read_text(encoding="utf-8")
    rows = re.findall(r"^\| 3-(\d+)B, \d+[^|]*\| `([^`]*)` \| ([\d.]+) \| ([\d.]+) \| ([\d.]+) \| ([\d.]+) \| ([\d.]+) \|", text, flags=re.M)
    assert len(rows) == 3
    for size, flags, *shown in rows:
        options = dict(re.findall(r"--(\w+)(?: (\d+))?", flags))
        plan = Plan(dp=int(options.get("dp") or 1), zero=int(options.get("zero") or 0), tp=int(options.get("tp") or 1),
                    sp="sp" in options)
        g = memory(bind(load_spec("llama"), f"3-{size}b"), 8192, 1, plan=plan).per_gpu()
        keys = ("weights_bytes", "gradients_bytes", "optimizer_bytes", "activations_bytes", "total_bytes")
        assert [f"{g[k] / 2**30:.2f}" for k in keys] == shown, (size, flags)
