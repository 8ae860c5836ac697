"""The IR (a tree of components with symbolic parameter tensors) and the lowering from a spec."""

from archcalc.ir.lower import Lowered, lower, per_ir
from archcalc.ir.nodes import ROLES, Component, Leaf, Tensor, leaves

__all__ = ["ROLES", "Component", "Leaf", "Lowered", "Tensor", "leaves", "lower", "per_ir"]
