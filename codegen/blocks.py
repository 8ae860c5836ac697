"""Source templates for the blocks (every residual arrangement) and the whole model."""

from __future__ import annotations

from typing import TYPE_CHECKING

from archcalc.ir import Component
from codegen.errors import UnsupportedError
from codegen.parts import camel, norm_expr

if TYPE_CHECKING:
    from codegen.emit import Emitter

RESIDUAL = {  # {r}: the rotary tables passed to attention
    "pre-norm": ("Pre-norm block: x + attn(norm(x)), then x + mlp(norm(x)).",
                 ["x = x + self.attn(self.attn_norm(x){r})", "x = x + self.mlp(self.mlp_norm(x))"]),
    "post-norm": ("Post-norm block: norm(x + attn(x)), then norm(x + mlp(x)).",
                  ["x = self.attn_norm(x + self.attn(x{r}))", "x = self.mlp_norm(x + self.mlp(x))"]),
    "sandwich": ("Sandwich block: x + post_norm(attn(norm(x))), likewise for the MLP.",
                 ["x = x + self.attn_post_norm(self.attn(self.attn_norm(x){r}))",
                  "x = x + self.mlp_post_norm(self.mlp(self.mlp_norm(x)))"]),
    "reordered": ("Reordered-norm block: x + norm(attn(x)), then x + norm(mlp(x)).",
                  ["x = x + self.attn_post_norm(self.attn(x{r}))", "x = x + self.mlp_post_norm(self.mlp(x))"]),
    "parallel-1": ("Parallel block: x + attn(norm(x)) + mlp(norm(x)) with one shared norm.",
                   ["h = self.norm(x)", "x = x + self.attn(h{r}) + self.mlp(h)"]),
    "parallel-2": ("Parallel block: x + attn(attn_norm(x)) + mlp(mlp_norm(x)).",
                   ["x = x + self.attn(self.attn_norm(x){r}) + self.mlp(self.mlp_norm(x))"]),
}

BLOCK_ORDER = ["norm", "attn_norm", "attn", "attn_post_norm", "cross_norm", "cross_attn", "mlp_norm", "mlp", "mlp_post_norm"]
ROPE = "rope: tuple[torch.Tensor, torch.Tensor]"


CROSS = {  # the cross-attention step of a decoder block (encoder-decoder models), after self-attention
    "pre-norm": "x = x + self.cross_attn(self.cross_norm(x), memory)",
    "post-norm": "x = self.cross_norm(x + self.cross_attn(x, memory))",
}


def block_class(em: Emitter, stack: Component, p: str, attn: str, mlp: str, norms: dict[str, str], rotary: bool,
                cls: str | None = None, cross: str | None = None, bias: bool = False) -> str:
    """A block class; ``cross``: the cross-attention class of a decoder block (forward takes ``memory``, the
    encoder output); ``bias``: forward takes the tower's position bias and passes it to self-attention."""
    residual = stack.attrs["residual"]
    if residual == "parallel":
        residual = "parallel-1" if "norm" in norms else "parallel-2"
    doc, body = RESIDUAL[residual]
    if cross is not None:
        if residual not in CROSS:
            raise UnsupportedError(f"codegen generates cross-attention in pre-norm and post-norm blocks only, not {residual}")
        doc = doc.replace(", then", ", then cross-attention to the encoder output, then")
        body = [body[0], CROSS[residual], *body[1:]]
    name = cls or f"{camel(p)}Block"
    init = []
    for child in sorted(stack.children, key=lambda c: BLOCK_ORDER.index(c.name) if c.name in BLOCK_ORDER else len(BLOCK_ORDER)):
        if child.name in norms:
            init.append(f"        self.{child.name} = {norms[child.name]}")
        elif child.name == "attn":
            init.append(f"        self.attn = {attn}(cfg{', window' if banded(stack) else ''})")
        elif child.name == "cross_attn" and cross is not None:
            init.append(f"        self.cross_attn = {cross}(cfg)")
        elif child.name == "mlp":
            init.append(f"        self.mlp = {mlp}(cfg)")
    signature = "cfg: Config, window: int | None = None" if banded(stack) else "cfg: Config"
    rope = (", memory: torch.Tensor" if cross else "") + (f", {ROPE}" if rotary else "") + (", bias: torch.Tensor" if bias else "")
    r = ", rope" if rotary else ", bias" if bias else ""
    lines = [f"class {name}(nn.Module):", f'    """{doc}"""', "", f"    def __init__(self, {signature}):",
             "        super().__init__()", *init, "",
             f"    def forward(self, x: torch.Tensor{rope}) -> torch.Tensor:  # (B, T, d)",
             *(f"        {line.format(r=r)}" for line in body), "        return x"]
    em.add("\n".join(lines))
    return name


POOLER = '''class Pooler(nn.Module):
    """BERT's pooler: tanh(dense(x)) of the first token's final hidden state; model.pooler(hidden) -> (B, d)."""

    def __init__(self, cfg: Config):
        super().__init__()
        self.dense = nn.Linear(cfg.width, cfg.width, bias=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (B, T, d)
        return torch.tanh(self.dense(x[:, 0]))  # (B, d)'''


def model_class(em: Emitter, stacks: list[tuple[Component, str]], final: Component | None, head: Component | None,
                rotary: bool = False, pooler: bool = False, token_types: bool = False) -> str:
    init = ["        self.embed = Embeddings(cfg)"]
    if rotary:
        init.append("        self.rotary = Rotary(cfg)  # no parameters, no buffers: the tables are computed in forward")
    for stack, block in stacks:
        p = f"{stack.name}_" if len(stacks) > 1 else ""
        layers = f"cfg.{p}layers"
        if banded(stack):
            attn = next(c for c in stack.children if c.name == "attn")
            local = tuple(k == "local" for k in attn.attrs["pattern"])
            window = em.field(f"{p}window", attn.attrs["window"], f"{attn.attrs['window']}: tokens a local layer sees")
            init.append(f"        local = {local!r}  # the layer pattern: True = sliding-window layer, repeating")
            init.append(f"        self.{stack.name} = nn.ModuleList(")
            init.append(f"            {block}(cfg, {window} if local[i % len(local)] else None) for i in range({layers})")
            init.append("        )")
        else:
            init.append(f"        self.{stack.name} = nn.ModuleList({block}(cfg) for _ in range({layers}))")
    if final is not None:
        init.append(f"        self.final_norm = {norm_expr(em, final, own=('norm_eps', 'final_norm_eps'))}")
    if pooler:
        em.add(POOLER)
        init.append("        self.pooler = Pooler(cfg)  # not part of forward: model.pooler(hidden) gives BERT's pooled output")
    if token_types:
        signature = "input_ids: torch.Tensor, token_type_ids: torch.Tensor | None = None"
        forward = ["        x = self.embed(input_ids, token_type_ids)  # (B, T, d)"]
    else:
        signature = "input_ids: torch.Tensor"
        forward = ["        x = self.embed(input_ids)  # (B, T, d)"]
    if rotary:
        forward.append("        rope = self.rotary(input_ids.shape[1], input_ids.device)  # (cos, sin), each (T, rotary_width)")
    for stack, _ in stacks:
        args = "x, rope" if rotary else "x"
        forward += [f"        for block in self.{stack.name}:",
                    f"            x = checkpoint(block, {args}, use_reentrant=False) if self.checkpointing else block({args})"]
    if final is not None:
        forward.append("        x = self.final_norm(x)")
    _head_or_hidden(em, head, init, forward)
    what = "embeddings, blocks" + (", final norm" if final is not None else "") + (", head" if head is not None else "")
    experts = any(c.kind == "moe" for stack, _ in stacks for c in stack.children)
    return _transformer(what, init, signature, forward, skip_meta=experts)


def _head_or_hidden(em: Emitter, head: Component | None, init: list[str], forward: list[str]) -> None:
    """End the model's forward with the head's logits, or with the hidden states when there is no head."""
    if head is None:
        forward.append("        return x  # (B, T, d)")
        return
    head_init, head_forward = head_lines(em, head)
    init += head_init
    forward += head_forward


def head_lines(em: Emitter, head: Component) -> tuple[list[str], list[str]]:
    """The head's lines in the model's __init__ and forward (forward: from the final hidden state x)."""
    init, forward = [], []
    weight = next(t for t in head.tensors if t.name == "weight")
    bias = any(t.name == "bias" for t in head.tensors)
    init.append(f"        self.head = nn.Linear(cfg.width, cfg.vocab, bias={bias})")
    if weight.tied_to is not None:
        init.append("        self.head.weight = self.embed.token.weight  # tied: one matrix, counted once")
    if head.attrs.get("scale_input"):
        init.append("        self.head_scale = cfg.width**-0.5  # T5 v1.0 scales the decoder output by d**-0.5 before the tied head")
        forward.append("        x = x * self.head_scale")
    if head.attrs.get("softcap") is not None:
        cap = em.field("logit_softcap", float(head.attrs["softcap"]), "logits are capped to (-cap, cap) by cap * tanh(z / cap)")
        init.append(f"        self.softcap = {cap}")
        forward += ["        logits = self.head(x)  # (B, T, V)",
                    "        return self.softcap * torch.tanh(logits / self.softcap)  # soft-capped logits"]
    else:
        forward.append("        return self.head(x)  # (B, T, V)")
    return init, forward


CHECKPOINTING = "        self.checkpointing = False  # True: keep only each block's input, recompute the rest in backward"


def _transformer(what: str, init: list[str], signature: str, forward: list[str], skip_meta: bool = False,
                 towers: bool = False) -> str:
    """``skip_meta``: initialise nothing on the meta device (normal_ on meta still costs a dispatch per tensor: seconds
    for the tens of thousands of expert matrices of a large mixture of experts). ``towers``: the blocks live in an
    encoder and a decoder, and ``checkpointing`` is a property that switches both."""
    skip = ["        if isinstance(module, (nn.Linear, nn.Embedding)) and module.weight.is_meta:",
            "            return  # shapes only: nothing to initialise"] if skip_meta else []
    lines = [
        "class Transformer(nn.Module):",
        f'    """The whole model: {what}."""',
        "",
        "    def __init__(self, cfg: Config = Config()):",
        "        super().__init__()",
        "        self.cfg = cfg",
        *([] if towers else [CHECKPOINTING]),
        *init,
        "        self.apply(self._init_weights)",
        "",
        "    @staticmethod",
        "    def _init_weights(module: nn.Module) -> None:",
        '        """GPT-2 style: normal(0, 0.02) weights, zero biases (a no-op on the meta device)."""',
        *skip,
        "        if isinstance(module, (nn.Linear, nn.Embedding)):",
        "            nn.init.normal_(module.weight, mean=0.0, std=0.02)",
        "        if isinstance(module, nn.Linear) and module.bias is not None:",
        "            nn.init.zeros_(module.bias)",
        "",
        "    def reset_parameters(self) -> None:",
        '        """Initialise every parameter (and buffer) again, in place, as build() does: for a model built on the meta',
        '        device and then given memory with model.to_empty(device=...), e.g. after sharding it with FSDP2."""',
        "        for module in self.modules():",
        '            if module is not self and hasattr(module, "reset_parameters"):',
        "                module.reset_parameters()",
        "        self.apply(self._init_weights)",
        "",
        f"    def forward(self, {signature}) -> torch.Tensor:  # (B, T) token ids",
        *forward,
    ]
    if towers:
        lines += [
            "",
            "    @property",
            "    def checkpointing(self) -> bool:",
            '        """True: both towers keep only each block\'s input and recompute the rest in backward."""',
            "        return self.encoder.checkpointing and self.decoder.checkpointing",
            "",
            "    @checkpointing.setter",
            "    def checkpointing(self, on: bool) -> None:",
            "        self.encoder.checkpointing = self.decoder.checkpointing = on",
        ]
    return "\n".join(lines)


def banded(stack: Component) -> bool:
    """Does this stack have sliding-window ('local') layers?"""
    attn = next(c for c in stack.children if c.name == "attn")
    return "local" in (attn.attrs.get("pattern") or ())


RELATIVE_BIAS = '''class RelativeBias(nn.Embedding):
    """T5's relative position bias: a learned score per head for each bucket of key - query distances.

    Nearby distances get a bucket each, farther ones share logarithmically wider buckets up to
    max_distance; bidirectional (encoder) buckets tell keys before the query from keys after it, causal
    (decoder) ones only look back. One table per tower, computed once and added to every layer's scores."""

    def __init__(self, cfg: Config, bidirectional: bool):
        super().__init__(cfg.rel_buckets, cfg.heads)  # (buckets, H)
        self.bidirectional, self.max_distance = bidirectional, cfg.rel_max_distance

    def bucket(self, distance: torch.Tensor) -> torch.Tensor:
        """The bucket of each key - query distance (as transformers' T5Attention._relative_position_bucket)."""
        buckets, offset = self.num_embeddings, torch.zeros_like(distance)
        if self.bidirectional:
            buckets //= 2
            offset = (distance > 0).long() * buckets  # keys after the query use the upper half
            distance = distance.abs()
        else:
            distance = -distance.clamp(max=0)  # only keys at or before the query
        exact = buckets // 2
        far = exact + (torch.log(distance.float() / exact) / math.log(self.max_distance / exact) * (buckets - exact)).long()
        far = far.clamp(max=buckets - 1)
        return offset + torch.where(distance < exact, distance, far)

    def forward(self, T: int, S: int) -> torch.Tensor:
        """The bias of T queries over S keys: (1, H, T, S)."""
        i = torch.arange(T, device=self.weight.device)
        j = torch.arange(S, device=self.weight.device)
        return super().forward(self.bucket(j[None, :] - i[:, None])).permute(2, 0, 1).unsqueeze(0)'''


def tower_class(em: Emitter, tower: Component, block: str, layers: str, final: str | None, rel_bias: bool) -> str:
    """The encoder or the decoder of an encoder-decoder model: its blocks, its position bias, its final norm."""
    decoder = tower.name == "decoder"
    name = camel(tower.name)
    init = [f"        self.blocks = nn.ModuleList({block}(cfg) for _ in range({layers}))",
            CHECKPOINTING]
    forward = []
    args = ", memory" if decoder else ""
    if rel_bias:
        em.add(RELATIVE_BIAS, helper=True)
        init.append(f"        self.rel_bias = RelativeBias(cfg, bidirectional={not decoder})  # shared by every block")
        forward.append("        T = x.shape[1]")
        if decoder:
            forward += ["        i = torch.arange(T, device=x.device)",
                        '        bias = self.rel_bias(T, T).masked_fill(i[None, :] > i[:, None], float("-inf"))  # (1, H, T, T), causal']
        else:
            forward.append("        bias = self.rel_bias(T, T)  # (1, H, T, T): computed once for all blocks")
        args += ", bias"
    if final is not None:
        init.append(f"        self.final_norm = {final}")
    forward += ["        for block in self.blocks:",
                f"            x = checkpoint(block, x{args}, use_reentrant=False) if self.checkpointing else block(x{args})"]
    forward.append("        return self.final_norm(x)  # (B, T, d)" if final is not None else "        return x  # (B, T, d)")
    what = ("decoder: causal self-attention, cross-attention to the encoder output" if decoder
            else "encoder: bidirectional self-attention") + (", a relative position bias shared by its blocks" if rel_bias else "")
    what += ", a final norm" if final is not None else ""
    signature = "x: torch.Tensor, memory: torch.Tensor" if decoder else "x: torch.Tensor"
    lines = [f"class {name}(nn.Module):", f'    """The {what}."""', "", "    def __init__(self, cfg: Config):",
             "        super().__init__()", *init, "", f"    def forward(self, {signature}) -> torch.Tensor:  # (B, T, d)", *forward]
    em.add("\n".join(lines))
    return name


def seq2seq_model_class(em: Emitter, encoder: str, decoder: str, head: Component | None) -> str:
    """The encoder-decoder model: one embedding for both towers, the encoder, the decoder, the head."""
    init = ["        self.embed = Embeddings(cfg)  # shared by the encoder and the decoder",
            f"        self.encoder = {encoder}(cfg)", f"        self.decoder = {decoder}(cfg)"]
    forward = ["        memory = self.encoder(self.embed(input_ids))  # (B, S, d)",
               "        x = self.decoder(self.embed(decoder_input_ids), memory)  # (B, T, d)"]
    _head_or_hidden(em, head, init, forward)
    what = "one embedding, the encoder, the decoder" + (", head" if head is not None else "")
    text = _transformer(what, init, "input_ids: torch.Tensor, decoder_input_ids: torch.Tensor", forward, towers=True)
    return text.replace(") -> torch.Tensor:  # (B, T) token ids", ") -> torch.Tensor:  # (B, S) and (B, T) token ids")
