"""Check a generated module against the IR: the same parameter names, shapes and total.

>>> from archcalc.spec import load_spec
>>> from archcalc.spec.bind import bind
>>> from archcalc.ir import lower
>>> report = verify(lower(bind(load_spec("gpt2"), "small")))
>>> report.ok, report.module_total
(True, 124439808)
"""

from __future__ import annotations

from dataclasses import dataclass, field

from archcalc.codegen.device import check_device, check_fits, check_tensor_count, is_out_of_memory
from archcalc.codegen.emit import emit
from archcalc.codegen.load import load_source
from archcalc.errors import UsageError
from archcalc.ir import Lowered, leaves


@dataclass
class Report:
    """What the IR expects and what the generated module holds."""

    ir_total: int
    module_total: int
    ir_tensors: int
    module_tensors: int
    missing: list[str] = field(default_factory=list)  # in the IR, not in the module
    extra: list[str] = field(default_factory=list)  # in the module, not in the IR
    shape_mismatches: list[str] = field(default_factory=list)
    tie_mismatches: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return (self.ir_total == self.module_total and not self.missing and not self.extra
                and not self.shape_mismatches and not self.tie_mismatches)


def expected_shapes(lowered: Lowered) -> tuple[dict[str, tuple[int, ...]], dict[str, str]]:
    """Every parameter the IR describes, by concrete name, and the tied names with their targets."""
    numeric = lowered.binding.numeric()
    shapes: dict[str, tuple[int, ...]] = {}
    ties: dict[str, str] = {}
    for leaf in leaves(lowered.root):
        shape = tuple(int(s.xreplace(numeric)) for s in leaf.tensor.shape)
        shared = _shared_ties(leaf, numeric)
        for name in leaf.instances(numeric):
            if leaf.tensor.tied_to or name in shared:
                ties[name] = leaf.tensor.tied_to or shared[name]
            else:
                shapes[name] = shape
    return shapes, ties


def _shared_ties(leaf, numeric) -> dict[str, str]:
    """A shared block's tensor (Zamba2's: it owns a share of its copies below one): layer k of its stack runs block
    k % held, so its name is a tie to layer k % held's (``blocks.5.shared.x`` -> ``blocks.1.shared.x``)."""
    if leaf.tensor.owned == 1 or not leaf.repeats:
        return {}
    prefix, count = leaf.repeats[0]
    held = int((leaf.tensor.owned * count).xreplace(numeric))
    ties = {}
    for name in leaf.instances(numeric):
        k, rest = name[len(prefix) + 1:].split(".", 1)
        if int(k) >= held:
            ties[name] = f"{prefix}.{int(k) % held}.{rest}"
    return ties


def verify(lowered: Lowered, device: str = "meta", module=None) -> Report:
    """Build the generated module on ``device`` and compare it with the IR.

    Refused before anything is built (UsageError, exit 2): a device that is not here, more parameter tensors than
    :data:`archcalc.codegen.device.MAX_TENSORS`, or fp32 weights larger than the device's free memory."""
    check_device(device)
    numeric = lowered.binding.numeric()
    all_leaves = leaves(lowered.root)
    what = f"{lowered.binding.spec.name} {lowered.binding.size}"
    check_tensor_count(sum(int(leaf.repeat.xreplace(numeric)) for leaf in all_leaves), what)
    total = sum(int(leaf.count.xreplace(numeric)) for leaf in all_leaves)
    check_fits(4 * total, f"{what}: {total:,} parameters in fp32", device,
               "verify on the meta device (the default: it allocates nothing) or pick a smaller size")
    module = module or load_source(emit(lowered, "archcalc verify"))
    try:
        model = module.build(device=device)
    except Exception as e:  # noqa: BLE001 - only an allocation failure is turned into a message
        if not is_out_of_memory(e):
            raise
        raise UsageError(f"{what}: building {total:,} parameters on {device} ran out of memory; verify on the meta "
                         "device (the default) or pick a smaller size") from None
    got = {name: tuple(p.shape) for name, p in model.named_parameters()}
    want, ties = expected_shapes(lowered)
    report = Report(
        ir_total=sum(_numel(s) for s in want.values()),
        module_total=sum(p.numel() for p in model.parameters()),
        ir_tensors=len(want),
        module_tensors=len(got),
        missing=sorted(set(want) - set(got)),
        extra=sorted(set(got) - set(want)),
        shape_mismatches=[f"{n}: IR {list(want[n])}, module {list(got[n])}" for n in want if n in got and want[n] != got[n]],
    )
    for name, target in ties.items():
        try:
            same = model.get_parameter(name) is model.get_parameter(target)
        except AttributeError:
            same = False
        if not same:
            report.tie_mismatches.append(f"{name} should be the same tensor as {target}")
    return report


def _numel(shape: tuple[int, ...]) -> int:
    n = 1
    for s in shape:
        n *= s
    return n
