"""The printer dispatches on the class of a component's settings, up its MRO, as sympy's printers do: a kind
without a method is refused in one line, and a subclass changes one kind by adding one method."""

from __future__ import annotations

import pytest

from archcalc.codegen.emit import UnsupportedError
from archcalc.codegen.printer import Printer, TorchPrinter
from tests.helpers import lowered


class Names(Printer):
    """Prints attention layers and norms only; anything else is refused."""

    def _print_Attention(self, node, **context) -> str:
        return f"attention {node.name}"

    def _print_Norm(self, node, **context) -> str:
        return f"{node.kind} {node.name}"


def test_dispatch_goes_up_the_settings_class_hierarchy():
    root = lowered("deepseek_v3", "671b").root
    assert Names().doprint(root.find("blocks.attn")) == "attention attn"  # LatentAttention: Attention's method serves
    assert Names().doprint(root.find("blocks.attn_norm")) == "rmsnorm attn_norm"
    with pytest.raises(UnsupportedError, match="codegen does not generate head components yet"):
        Names().doprint(root.find("head"))


def test_a_subclass_changes_one_kind_with_one_method():
    class Commented(TorchPrinter):
        def _print_MLP(self, mlp, prefix: str) -> str:
            name = super()._print_MLP(mlp, prefix)
            self.em.classes[-1] = f"# the feed-forward net\n{self.em.classes[-1]}"
            return name

    low = lowered("gpt2", "small")
    plain, commented = TorchPrinter(low), Commented(low)
    plain.doprint(low.root)
    commented.doprint(low.root)
    changed = [(a, b) for a, b in zip(plain.em.classes, commented.em.classes, strict=True) if a != b]
    assert [b.splitlines()[:2] for _, b in changed] == [["# the feed-forward net", "class MLP(nn.Module):"]]
