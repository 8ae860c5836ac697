"""Source templates for the blocks (every residual arrangement) and the whole model."""

from __future__ import annotations

from typing import TYPE_CHECKING

from archcalc.ir import Component
from codegen.errors import UnsupportedError
from codegen.parts import camel

if TYPE_CHECKING:
    from codegen.emitter import Emitter

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
    residual = stack.attrs.residual
    if residual == "parallel":
        residual = "parallel-1" if "norm" in norms else "parallel-2"
    doc, body = RESIDUAL[residual]
    multiplier = stack.attrs.residual_multiplier
    if multiplier is not None:  # Granite: x + branch(x) * m
        if residual == "post-norm" or cross is not None:
            raise UnsupportedError("codegen generates a residual multiplier in pre-norm, sandwich, reordered and parallel blocks only")
        doc = doc.rstrip(".") + "; each branch's output times residual_multiplier before it is added."
        body = [_scaled_branches(line) for line in body]
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
            init.append(f"        self.attn = {attn}(cfg{', window' if banded(stack) else ''}{', rotary=rotary' if unrotated(stack) else ''}"
                        f"{', chunk=chunk' if chunked(stack) else ''})")
        elif child.name == "cross_attn" and cross is not None:
            init.append(f"        self.cross_attn = {cross}(cfg)")
        elif child.name == "mlp":
            init.append(f"        self.mlp = {mlp}(cfg)")
    signature = "cfg: Config, window: int | None = None" if banded(stack) else "cfg: Config"
    signature += ", rotary: bool = True" if unrotated(stack) else ""
    signature += ", chunk: int | None = None" if chunked(stack) else ""
    causal = stack.attrs.causal
    args = (", memory: torch.Tensor" if cross else "") + (f", {ROPE}" if rotary else "") + (", bias: torch.Tensor" if bias else "")
    if cross:
        args += ", cache: tuple[KVCache, KVCache] | None = None"
    elif causal:
        args += ", cache: KVCache | None = None"
    r = (", rope" if rotary else ", bias" if bias else "") + (", self_cache" if cross else ", cache" if causal else "")
    body = [line.format(r=r).replace("memory)", "memory, cross_cache)") if cross else line.format(r=r) for line in body]
    if cross:
        body.insert(0, "self_cache, cross_cache = cache if cache is not None else (None, None)")
    if multiplier is not None:
        init.append(f"        self.residual_multiplier = {em.field('residual_multiplier', multiplier, 'each branch is multiplied by this before it is added')}")
    lines = [f"class {name}(nn.Module):", f'    """{doc}"""', "", f"    def __init__(self, {signature}):",
             "        super().__init__()", *init, "",
             f"    def forward(self, x: torch.Tensor{args}) -> torch.Tensor:  # (B, T, d)",
             *(f"        {line}" for line in body), "        return x"]
    em.add("\n".join(lines))
    return name


POOLER = '''class Pooler(nn.Module):
    """BERT's pooler: tanh(dense(x)) of the first token's final hidden state; model.pooler(hidden) -> (B, d)."""

    def __init__(self, cfg: Config):
        super().__init__()
        self.dense = nn.Linear(cfg.width, cfg.width, bias=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (B, T, d)
        return torch.tanh(self.dense(x[:, 0]))  # (B, d)'''


def chunked(stack: Component) -> bool:
    """Does this stack have chunked layers (a token sees the earlier tokens of its own block of `chunk` tokens)?"""
    attn = next(c for c in stack.children if c.name == "attn")
    return attn.attrs.chunked


def stack_init(em: Emitter, stack: Component, block: str, p: str, layers: str) -> list[str]:
    """The model's __init__ lines that build a stack's ModuleList, each layer with its window, rotary and chunk settings
    (the stack's patterns, repeating)."""
    if not (banded(stack) or unrotated(stack) or chunked(stack)):
        return [f"        self.{stack.name} = nn.ModuleList({block}(cfg) for _ in range({layers}))"]
    a = next(c for c in stack.children if c.name == "attn").attrs
    init, args = [], []
    if banded(stack):
        local = tuple(kind == "local" for kind in a.pattern)
        window = em.field(f"{p}window", a.window, f"{a.window}: tokens a local layer sees")
        init.append(f"        local = {local!r}  # the layer pattern: True = sliding-window layer, repeating")
        args.append(f"{window} if local[i % len(local)] else None")
    if unrotated(stack):
        init.append(f"        rotated = {a.rotary_pattern!r}  # False: a layer without rotary positions (NoPE), repeating")
        args.append("rotary=rotated[i % len(rotated)]")
    if chunked(stack):
        chunks = tuple(kind == "chunked" for kind in a.pattern)
        size = em.field(f"{p}chunk", a.chunk, f"{a.chunk}: tokens per block of a chunked layer")
        init.append(f"        chunked = {chunks!r}  # True: a layer that attends within blocks of `chunk` tokens, repeating")
        args.append(f"chunk={size} if chunked[i % len(chunked)] else None")
    return init + [f"        self.{stack.name} = nn.ModuleList(", f"            {block}(cfg, {', '.join(args)}) for i in range({layers})",
                   "        )"]


def interleaved(em: Emitter, names: list[str]) -> list[str]:
    """The model's __init__ lines that list every layer in the order they run, where the spec interleaves its stacks
    (``layer_order``; none otherwise): ``self.layer_list``, which forward and new_cache walk."""
    order = em.lowered.root.attrs.layer_order
    if order is None:
        return []
    total = " + ".join(f"len(self.{n})" for n in names)
    return [f"        order = {order!r}  # the stacks' layers interleaved: layer i comes from stack order[i % len(order)]",
            "        stacks = {name: iter(getattr(self, name)) for name in order}",
            f"        self.layer_list = [next(stacks[order[i % len(order)]]) for i in range({total})]  # every layer, in order"]


def banded(stack: Component) -> bool:
    """Does this stack have sliding-window ('local') layers?"""
    attn = next(c for c in stack.children if c.name == "attn")
    return attn.attrs.banded


def _scaled_branches(line: str) -> str:
    """``x = x + f(...) + g(...)`` as ``x = x + (f(...) + g(...)) * self.residual_multiplier``; other lines as they are."""
    if not line.startswith("x = x + "):
        return line
    branches = line[len("x = x + "):]
    return f"x = x + ({branches}) * self.residual_multiplier" if " + " in branches else f"x = x + {branches} * self.residual_multiplier"


def unrotated(stack: Component) -> bool:
    """Do some layers of this stack leave out rotary positions (NoPE layers)?"""
    attn = next(c for c in stack.children if c.name == "attn")
    return False in attn.attrs.rotary_pattern


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

    def forward(self, start: int, T: int, S: int) -> torch.Tensor:
        """The bias of T queries at positions start .. start + T - 1 over the keys at 0 .. S - 1: (1, H, T, S)."""
        i = torch.arange(start, start + T, device=self.weight.device)
        j = torch.arange(S, device=self.weight.device)
        return super().forward(self.bucket(j[None, :] - i[:, None])).permute(2, 0, 1).unsqueeze(0)'''


CHECKPOINTING = "        self.checkpointing = False  # True: keep only each block's input, recompute the rest in backward"


def tower_class(em: Emitter, tower: Component, block: str, layers: str, final: str | None, rel_bias: bool) -> str:
    """The encoder or the decoder of an encoder-decoder model: its blocks, its position bias, its final norm.
    The decoder takes a cache for generation: a (self-attention, cross-attention) pair of KVCaches per block."""
    decoder = tower.name == "decoder"
    name = camel(tower.name)
    init = [f"        self.blocks = nn.ModuleList({block}(cfg) for _ in range({layers}))", CHECKPOINTING]
    forward = []
    args = ", memory" if decoder else ""
    if decoder and rel_bias:
        forward.append("        start = cache[0][0].seen if cache is not None else 0  # the position of the first of these tokens")
    if rel_bias:
        em.add(RELATIVE_BIAS, helper=True)
        init.append(f"        self.rel_bias = RelativeBias(cfg, bidirectional={not decoder})  # shared by every block")
        forward.append("        T = x.shape[1]")
        if decoder:
            forward += ["        i, j = torch.arange(start, start + T, device=x.device), torch.arange(start + T, device=x.device)",
                        '        bias = self.rel_bias(start, T, start + T).masked_fill(j[None, :] > i[:, None], float("-inf"))  # (1, H, T, S), causal']
        else:
            forward.append("        bias = self.rel_bias(0, T, T)  # (1, H, T, T): computed once for all blocks")
        args += ", bias"
    if final is not None:
        init.append(f"        self.final_norm = {final}")
    if decoder:
        forward += ["        caches = cache if cache is not None else [None] * len(self.blocks)",
                    "        for block, layer_cache in zip(self.blocks, caches, strict=True):",
                    "            if self.checkpointing and layer_cache is None:  # training: keep the block's input, recompute the rest",
                    f"                x = checkpoint(block, x{args}, use_reentrant=False)",
                    "            else:",
                    f"                x = block(x{args}, layer_cache)"]
    else:
        forward += ["        for block in self.blocks:",
                    f"            x = checkpoint(block, x{args}, use_reentrant=False) if self.checkpointing else block(x{args})"]
    forward.append("        return self.final_norm(x)  # (B, T, d)" if final is not None else "        return x  # (B, T, d)")
    what = ("decoder: causal self-attention, cross-attention to the encoder output" if decoder
            else "encoder: bidirectional self-attention") + (", a relative position bias shared by its blocks" if rel_bias else "")
    what += ", a final norm" if final is not None else ""
    signature = ("x: torch.Tensor, memory: torch.Tensor, cache: list[tuple[KVCache, KVCache]] | None = None" if decoder
                 else "x: torch.Tensor")
    lines = [f"class {name}(nn.Module):", f'    """The {what}."""', "", "    def __init__(self, cfg: Config):",
             "        super().__init__()", *init, "", f"    def forward(self, {signature}) -> torch.Tensor:  # (B, T, d)", *forward]
    em.add("\n".join(lines))
    return name
