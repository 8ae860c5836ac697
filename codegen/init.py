"""Source template of the generated ``Transformer.reset_parameters``: the spec's ``init`` section (normal, t5 or xavier,
with the scaled residual projections), as transformers' ``_init_weights`` for the family does it, so that a fresh
model starts where transformers' would (tests/codegen/test_init.py compares them tensor by tensor)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from codegen.emitter import Emitter

RESIDUAL_OUT = ("attn.out.weight", "down.weight")  # the projections that add into the residual stream


def init_method(em: Emitter, layers: str, tied: bool) -> list[str]:
    """``reset_parameters``: the spec's init scheme, as transformers' ``_init_weights`` for the family does it."""
    init = em.lowered.root.attrs.init
    doc_tail = ["        build() calls it; so does a model built on the meta device once it has memory",
                '        (model.to_empty(device=...), e.g. after sharding it with FSDP2)."""']
    if init.scheme == "t5":
        em.field("init_std", float(init.std), "transformers' initializer_factor: the scale of every initial weight")
        return [
            "    def reset_parameters(self) -> None:",
            '        """(Re)initialise every weight in place as transformers\' T5 does: each matrix normal(0, init_std / sqrt(fan_in)),',
            "        the queries' also divided by sqrt(head_width) (T5 does not scale its scores); the embedding and an untied",
            "        head normal(0, init_std), the position bias normal(0, init_std / sqrt(width)), norm weights init_std.",
            *doc_tail,
            "        for name, module in self.named_modules():",
            "            if isinstance(module, RelativeBias):",
            "                nn.init.normal_(module.weight, mean=0.0, std=self.cfg.init_std * self.cfg.width**-0.5)",
            '            elif isinstance(module, nn.Embedding) or name == "head":',
            "                nn.init.normal_(module.weight, mean=0.0, std=self.cfg.init_std)",
            "            elif isinstance(module, nn.Linear):",
            "                std = self.cfg.init_std * module.in_features**-0.5",
            '                nn.init.normal_(module.weight, mean=0.0, std=std * self.cfg.head_width**-0.5 if name.endswith(".q") else std)',
            "            elif isinstance(module, nn.RMSNorm):",
            "                nn.init.constant_(module.weight, self.cfg.init_std)",
        ]
    if init.scheme == "xavier":
        skip = ["            if module is self.head:", "                continue  # tied: the token embeddings, initialised below"] if tied else []
        return [
            "    def reset_parameters(self) -> None:",
            '        """(Re)initialise every weight in place as fairseq\'s Transformer does: Xavier-uniform matrices, zero biases,',
            "        embeddings normal(0, width**-0.5)" + (" (the tied head keeps them)" if tied else "") + ", norm weights one.",
            *doc_tail,
            "        for module in self.modules():",
            *skip,
            "            if isinstance(module, nn.Linear):",
            "                nn.init.xavier_uniform_(module.weight)",
            "                if module.bias is not None:",
            "                    nn.init.zeros_(module.bias)",
            "            elif isinstance(module, nn.Embedding):",
            "                nn.init.normal_(module.weight, mean=0.0, std=self.cfg.width**-0.5)",
            "            elif module is not self and hasattr(module, \"reset_parameters\"):",
            "                module.reset_parameters()  # norms: weight one, bias zero",
        ]
    em.field("init_std", float(init.std), "weights start as normal(0, init_std) (transformers' initializer_range)")
    names = _leaf_names(em)
    extra_std = sorted(n for n in ("sinks", "router.bias") if any(name.endswith(n) for name in names))
    lines = [
        "    def reset_parameters(self) -> None:",
        '        """(Re)initialise every weight in place as transformers\' _init_weights does: matrices and embeddings',
        "        normal(0, init_std), biases zero, norms reset (weight one; Gemma's (1 + w) weight zero)"
        + (";" if init.scaled_residual or extra_std else "."),
    ]
    if init.scaled_residual:
        lines.append("        the projections into the residual stream (attention's out, the MLP's down) normal(0, init_std / sqrt(2 * layers))"
                     + (";" if extra_std else "."))
    if extra_std:
        lines.append("        the attention sinks and the router's bias normal(0, init_std), as gpt-oss's.")
    lines += [
        *doc_tail,
        "        for module in self.modules():",
        "            if isinstance(module, (nn.Linear, nn.Embedding)):",
        "                nn.init.normal_(module.weight, mean=0.0, std=self.cfg.init_std)",
        '                if getattr(module, "bias", None) is not None:',
        "                    nn.init.zeros_(module.bias)",
        '            elif module is not self and hasattr(module, "reset_parameters"):',
        "                module.reset_parameters()  # norms; routing biases",
    ]
    if init.scaled_residual or extra_std:
        lines.append("        for name, param in self.named_parameters():")
        if init.scaled_residual:
            lines += [f"            if name.endswith({RESIDUAL_OUT!r}):  # GPT-2: residual projections scaled down by depth",
                      f"                nn.init.normal_(param, mean=0.0, std=self.cfg.init_std / math.sqrt(2 * {layers}))"]
        if extra_std:
            lines += [f"            if name.endswith({tuple(extra_std)!r}):",
                      "                nn.init.normal_(param, mean=0.0, std=self.cfg.init_std)"]
    return lines


def _leaf_names(em: Emitter) -> list[str]:
    from archcalc.ir import leaves

    return [leaf.path for leaf in leaves(em.lowered.root)]
