"""archcalc plan's communication bytes against what a real two-process run sends: the generated module trained one
step on gloo, every collective counted as it runs (archcalc.codegen.comm_count), for FSDP2 (ZeRO-3) over two
data-parallel ranks and for tensor parallelism over two."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("torch")

from archcalc.backends.infer.hardware import hardware  # noqa: E402
from archcalc.backends.parallel_plan import Plan  # noqa: E402
from archcalc.backends.training_plan import Cluster, Job, Planner  # noqa: E402
from archcalc.codegen.emit import emit  # noqa: E402
from tests.helpers import lowered  # noqa: E402

TINY = dict(L=2, d=32, H=4, KV=2, d_ff=48, V=64)
BATCH, SEQ = 2, 16


@pytest.mark.parametrize(("tp", "collective"), [(1, "data parallel"), (2, "tensor parallel")])
def test_counted_bytes_equal_the_plans(process, tmp_path, tp, collective):
    model = lowered("llama", "2-7b", **TINY)
    path = tmp_path / "model.py"
    path.write_text(emit(model, "test"), encoding="utf-8")
    run = process.run(["-m", "archcalc.codegen.comm_count", str(path), "--nproc", "2", "--tp", str(tp),
                       "--batch", str(BATCH), "--seq-len", str(SEQ)])
    assert run.returncode == 0, run.stderr
    ranks = json.loads(run.stdout)
    hw = hardware("h100-sxm")
    planner = Planner(Job(model, SEQ, BATCH, BATCH * SEQ), Cluster(hw, 2, 8, hw.link, hw.network), layout="generated")
    dp = 2 // tp
    plan = Plan(dp=dp, zero=3 if dp > 1 else 0, tp=tp, precision="fp32")  # archcalc run's fp32 training
    expected = planner.candidate(plan, BATCH // dp, False).comm
    assert set(expected) == {collective}
    for rank in ranks:
        assert sum(rank["sent"].values()) == expected[collective]["bytes"], rank
