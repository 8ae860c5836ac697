"""The IR: a tree of components whose leaves are named parameter tensors with symbolic shapes.

Every backend reads this tree: ``count`` sums the leaves, later backends add FLOPs, memory and the
PyTorch emitter. A tensor's path (``blocks.attn.qkv.weight``) is the same string in the count
breakdown, in the generated module's ``state_dict()`` (with the layer index, ``blocks.3.attn...``)
and in the docs. A component with ``repeat`` = L stands for L copies (the blocks of a stack); the
multiplicities along a path multiply.

>>> import sympy
>>> d, L = sympy.symbols("d L", positive=True, integer=True)
>>> from archcalc.ir.attrs import Block, LayerNorm, Norm, Tower
>>> norm = Component("ln", LayerNorm(d, 1e-5), tensors=(Tensor("weight", (d,), "norm"),))
>>> stack = Component("blocks", Block("pre-norm", causal=True), children=(norm,), repeat=L)
>>> {leaf.path: leaf.count for leaf in leaves(Component("", Tower(causal=True), children=(stack,)))}
{'blocks.ln.weight': L*d}
>>> norm.kind, isinstance(norm.attrs, Norm)
('layernorm', True)
>>> Component("ln", Norm(d, 1e-5))
Traceback (most recent call last):
TypeError: Norm settings make no kind of component; kinds: model, embeddings, embedding, tower, block, attention, mamba, mamba2, gated_deltanet, short_conv, conv, linear, layernorm, rmsnorm, mlp, moe, experts, pooler, relative_bias, head, indexer, adapter, shared, mtp
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass

import sympy

from archcalc.ir.attrs import KINDS, Attrs, Block

ROLES = ("token_embedding", "position_embedding", "attention", "mixer", "mlp", "norm", "lm_head", "mtp", "other")
ONE = sympy.Integer(1)


@dataclass(frozen=True)
class Tensor:
    """A parameter tensor: ``shape`` in torch's layout (a Linear weight is out × in).

    ``active`` is the share of it that one token uses (1 for dense weights, top_k/experts for a
    routed expert, 0 for an embedding lookup). ``tied_to`` names the tensor whose storage this one
    shares (a tied head): it is used in the forward pass but not counted again. ``owned`` is the share of its copies
    that hold storage of their own (Zamba2's shared blocks: min(M, uses) / uses, each of M blocks run by several
    layers); the others reuse it, so counts multiply by it while the ops still run every copy (above 1: copies held
    beyond those used, as transformers' untied Zamba2 keeps).
    """

    name: str
    shape: tuple[sympy.Expr, ...]
    role: str
    active: sympy.Expr = ONE
    tied_to: str | None = None
    owned: sympy.Expr = ONE

    def __post_init__(self) -> None:
        if self.role not in ROLES:
            raise ValueError(f"unknown role {self.role!r}; roles: {ROLES}")

    @property
    def numel(self) -> sympy.Expr:
        return sympy.Mul(*self.shape) if self.shape else ONE


@dataclass(frozen=True)
class Component:
    """A node of the tree: a module of the generated code and its settings, ``attrs``: a dataclass of
    :mod:`archcalc.ir.attrs`, whose class says what the node is (ask ``isinstance(node.attrs, Attention)``; ``kind``,
    the class's name for it, is for printing)."""

    name: str
    attrs: Attrs
    tensors: tuple[Tensor, ...] = ()
    children: tuple[Component, ...] = ()
    repeat: sympy.Expr = ONE

    def __post_init__(self) -> None:
        if not isinstance(self.attrs, Attrs) or not hasattr(self.attrs, "kind"):
            raise TypeError(f"{type(self.attrs).__name__} settings make no kind of component; kinds: {', '.join(KINDS)}")

    @property
    def kind(self) -> str:
        """What the node is, in words (``attention``, ``rmsnorm``...): the ``kind`` of its settings' class."""
        return self.attrs.kind

    def find(self, path: str) -> Component | None:
        """The descendant at dotted ``path`` (component names only), or None."""
        node: Component | None = self
        for part in filter(None, path.split(".")):
            node = next((c for c in node.children if c.name == part), None) if node else None
        return node

    def walk(self, prefix: str = "") -> Iterator[tuple[str, Component]]:
        """Every component with its dotted path, parents first."""
        path = f"{prefix}.{self.name}" if prefix and self.name else prefix or self.name
        yield path, self
        for child in self.children:
            yield from child.walk(path)


@dataclass(frozen=True)
class Leaf:
    """A tensor with its full path and how many copies of it the model holds."""

    path: str
    tensor: Tensor
    repeat: sympy.Expr
    repeats: tuple[tuple[str, sympy.Expr], ...] = ()  # (path of a repeated component, its count), outermost first

    def instances(self, numeric: Mapping[sympy.Symbol, sympy.Expr]) -> list[str]:
        """The concrete names of every copy, with layer indices: ``blocks.0.attn.qkv.weight``, ..."""
        names = [self.path]
        for prefix, count in reversed(self.repeats):
            n = int(count.xreplace(numeric))
            names = [name[: len(prefix)] + f".{i}" + name[len(prefix):] for name in names for i in range(n)]
        return sorted(names, key=_natural) if self.repeats else names

    @property
    def count(self) -> sympy.Expr:
        """Parameters in all copies of this tensor (0 if it is tied to another)."""
        return sympy.Integer(0) if self.tensor.tied_to else self.repeat * self.tensor.numel * self.tensor.owned

    @property
    def active_count(self) -> sympy.Expr:
        """Parameters of all copies that one token uses (a tied head counts here: it is used; a shared block's once)."""
        return self.repeat * self.tensor.numel * self.tensor.active * self.tensor.owned


def leaves(root: Component) -> list[Leaf]:
    """All tensors of the tree, in definition order, with their paths and multiplicities."""
    out: list[Leaf] = []

    def visit(node: Component, prefix: str, repeat: sympy.Expr, repeats: tuple) -> None:
        path = f"{prefix}.{node.name}" if prefix and node.name else prefix or node.name
        repeat = repeat * node.repeat
        if node.repeat != ONE or isinstance(node.attrs, Block):  # a stack is indexed (blocks.0...) even with one block
            repeats = repeats + ((path, node.repeat),)
        for t in node.tensors:
            out.append(Leaf(f"{path}.{t.name}" if path else t.name, t, repeat, repeats))
        for child in node.children:
            visit(child, path, repeat, repeats)

    visit(root, "", ONE, ())
    return out


def _natural(name: str) -> list:
    """Sort key that puts ``blocks.2`` before ``blocks.10``."""
    return [int(p) if p.isdigit() else p for p in name.split(".")]
