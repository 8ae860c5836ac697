"""Source templates for the blocks (every residual arrangement) and the whole model."""

from __future__ import annotations

from typing import TYPE_CHECKING

from archcalc.codegen.errors import UnsupportedError
from archcalc.codegen.literal import fitted, flat
from archcalc.codegen.parts import ACTIVATIONS, camel, docstring
from archcalc.codegen.template import unit
from archcalc.ir import Component

if TYPE_CHECKING:
    from archcalc.codegen.emitter import Emitter

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

BLOCK_ORDER = ["norm", "attn_norm", "attn", "attn_post_norm", "cross_norm", "cross_attn", "mlp_norm", "mlp", "mlp_out_norm",
               "moe_norm", "moe", "moe_post_norm", "mlp_post_norm"]
MOE_BESIDE = [  # Gemma 4's: the block's MLP step with a mixture of experts beside the dense MLP
    "# the dense MLP and the experts side by side, each behind norms of its own; the router reads x",
    "dense = self.mlp_out_norm(self.mlp(self.mlp_norm(x)))",
    "experts = self.moe_post_norm(self.moe(self.moe_norm(x), x))",
    "x = x + self.mlp_post_norm(dense + experts)",
]


CROSS = {  # the cross-attention step of a decoder block (encoder-decoder models), after self-attention
    "pre-norm": "x = x + self.cross_attn(self.cross_norm(x), memory)",
    "post-norm": "x = self.cross_norm(x + self.cross_attn(x, memory))",
}


def block_class(em: Emitter, stack: Component, p: str, attn: str, mlp: str | None, norms: dict[str, str], rotary: bool,
                cls: str | None = None, cross: str | None = None, bias: bool = False, moe: str | None = None) -> str:
    """A block class (``templates/blocks.py``); ``mlp`` None: attention alone (a pre-norm block); ``cross``: the
    cross-attention class of a decoder block (forward takes ``memory``, the encoder output); ``bias``: forward takes the
    tower's position bias and passes it to self-attention; ``moe``: the class of the mixture of experts beside the MLP
    (Gemma 4's, in a sandwich block)."""
    residual = stack.attrs.residual
    if residual == "parallel":
        residual = "parallel-1" if "norm" in norms else "parallel-2"
    doc, body = _residual(stack, residual, cross is not None)
    if mlp is None:  # attention alone (the spec allows it pre-norm only): its first step
        doc, body = doc.split(", then")[0] + ".", [line for line in body if "self.mlp" not in line]
    multiplier = stack.attrs.residual_multiplier
    init = _modules(stack, attn, mlp, {k: v for k, v in norms.items() if k != "ple_norm"}, cross, moe)  # (ple_norm: below)
    if moe is not None:
        if residual != "sandwich" or multiplier is not None:
            raise UnsupportedError("codegen generates a mixture of experts beside the MLP in a sandwich block only")
        body = [*body[:-1], *MOE_BESIDE]  # for the MLP's step
        doc = doc.replace("likewise for the MLP", "then x + mlp_post_norm(mlp_out_norm(mlp(mlp_norm(x))) + "
                          "moe_post_norm(moe(moe_norm(x), x))), a mixture of experts beside the MLP")
    if multiplier is not None:
        field = em.field("residual_multiplier", multiplier, "each branch is multiplied by this before it is added")
        init.append(f"        self.residual_multiplier = {field}")
    scalar = layer_scalar(em, stack)
    if scalar:  # Gemma 4: the checkpoint scales each layer's output
        init += ["        # the checkpoint's scale of this layer's output (transformers' layer_scalar): a buffer, 1 until",
                 "        # a checkpoint is loaded; not trained", '        self.register_buffer("layer_scalar", torch.ones(1))']
        body = [*body, "x = x * self.layer_scalar"]  # (a new list: _residual gives the shared one)
    kv = sharing_kv(em)  # Gemma 4's KV sharing: every layer is handed the model's dict of keys and values
    r = (", rope" if rotary else ", bias" if bias else "") + (", kv" if kv else "") + \
        (", self_cache" if cross else ", cache" if stack.attrs.causal else "")
    body = [line.format(r=r).replace("memory)", "memory, cross_cache)") if cross else line.format(r=r) for line in body]
    per_layer = any(c.name == "ple_gate" for c in stack.children)
    if per_layer:  # Gemma 4's per-layer input, after the MLP (and before the layer's scale)
        init += _per_layer_modules(em, stack)
        act = ACTIVATIONS[next(c for c in stack.children if c.name == "mlp").attrs.activation][0]
        lines = [line.format(act=act.format(x="self.ple_gate(x)")) for line in PER_LAYER_INPUT]
        body = [*body[:len(body) - scalar], *lines, *body[len(body) - scalar:]]
        doc = doc.rstrip(".") + "; then x + ple_norm(ple_proj(act(ple_gate(x)) * per_layer)), the per-layer input."
    if cross:
        body.insert(0, "self_cache, cross_cache = cache if cache is not None else (None, None)")
    short = shortcut(stack)
    if short:
        doc, body = _shortcut(stack, residual, scalar, multiplier, body)
    flags = {"banded": banded(stack), "nope": unrotated(stack), "chunked": chunked(stack), "cross": cross is not None,
             "rotary": rotary, "bias": bias, "cached": cross is not None or stack.attrs.causal, "embeddings": False,
             "layer_scalar": scalar, "shortcut": short, "per_layer": per_layer, "kv": kv}
    names = {"Block": cls or f"{camel(p)}Block", "DOC": docstring(doc, 4),
             "BlockCache": "tuple[KVCache, KVCache]" if cross else "KVCache",
             "BlockOutput": "tuple[torch.Tensor, torch.Tensor]" if short else "torch.Tensor"}
    inserts = {"modules": "\n".join(init), "body": "\n".join(f"        {line}" for line in body)}
    em.add(unit("blocks", "Block", flags, names, inserts=inserts))
    return names["Block"]


def shortcut(stack: Component) -> bool:
    """Is this stack's MLP a shortcut-connected mixture of experts (LongCat-Flash's first blocks), whose routed
    experts' output joins the residual after the next block?"""
    mlp = next((c for c in stack.children if c.name == "mlp"), None)
    return mlp is not None and bool(getattr(mlp.attrs, "shortcut", False))


def _shortcut(stack: Component, residual: str, scalar: bool, multiplier, body: list[str]) -> tuple[str, list[str]]:
    """The doc and forward lines of a pre-norm block whose mixture of experts is shortcut-connected: the shared
    expert's output added at once, the routed experts' returned beside x, for the model to add after the next block."""
    if residual != "pre-norm" or scalar or multiplier is not None:
        raise UnsupportedError("codegen generates a shortcut-connected mixture of experts in a plain pre-norm block only")
    doc = ("Pre-norm block whose mixture of experts is shortcut-connected (LongCat-Flash): x + attn(norm(x)), then "
           "x + the shared expert of norm(x); the routed experts' output comes back beside x and joins the residual "
           "after the next block.")
    return doc, [body[0], "# the shared expert joins the residual now, the routed experts after the next block",
                 "routed, shared = self.mlp(self.mlp_norm(x))", "return x + shared, routed"]


PER_LAYER_INPUT = [  # the block's forward lines of Gemma 4's per-layer input ({act}: the MLP's activation)
    "# the per-layer input: this layer's slice of the per-layer embeddings, gated by x",
    "gated = {act} * per_layer  # (B, T, P)",
    "x = x + self.ple_norm(self.ple_proj(gated))",
]


def sharing_kv(em: Emitter) -> bool:
    """Does some layer reuse an earlier layer's keys and values (Gemma 4's kv_shared)? Then the model hands every layer
    a dict of the keys and values of the last layer of each kind."""
    return any(getattr(node.attrs, "kv_shared", False) for _, node in em.lowered.root.walk())


def _per_layer_modules(em: Emitter, stack: Component) -> list[str]:
    """__init__'s lines of Gemma 4's per-layer input: the gate down to its width, the projection back, the norm."""
    from archcalc.codegen.parts import norm_expr

    kids = {c.name: c for c in stack.children}
    width = em.field("per_layer_width", kids["ple_gate"].attrs.out_features, "P: width of a layer's per-layer input")
    norm = norm_expr(em, kids["ple_norm"], own=("norm_eps",))
    return ["        # the per-layer input: x gates it (d -> P), then it goes back to the model's width",
            f"        self.ple_gate = nn.Linear(cfg.width, {width}, bias=False)",
            f"        self.ple_proj = nn.Linear({width}, cfg.width, bias=False)",
            f"        self.ple_norm = {norm}"]


def layer_scalar(em: Emitter, stack: Component) -> bool:
    """Does each layer of this stack multiply its output by a scalar of the checkpoint (a buffer transformers saves,
    Gemma 4's layer_scalar, which the spec's weight layout lists)?"""
    from archcalc.hf.registry import weights_of
    from archcalc.hf.weights import LAYOUTS

    layout = LAYOUTS.get(weights_of(em.lowered.binding.spec.hf) or "")
    return layout is not None and f"{stack.name}.{{i}}.layer_scalar" in (layout.buffers or {})


def mixer_block_class(em: Emitter, stack: Component, p: str, mixer: str | None, mlp: str | None, norms: dict[str, str],
                      rotary: bool = False, bias: bool = False, embeddings: bool = False) -> str:
    """A pre-norm block of a state-space mixer and, where the stack has one, an MLP, or of an MLP alone (``mixer``
    None: Nemotron-H's) (``templates/blocks.py``): forward takes the layer's ``MixerCache`` (an MLP alone: None, as it
    keeps nothing); in a hybrid, also what the attention blocks take (``rotary``: the rotary tables; ``bias``: ALiBi's
    bias; ``embeddings``: the token embeddings, which Zamba2's hybrid layers read), unused, so that every layer is
    called alike."""
    multiplier = stack.attrs.residual_multiplier  # Granite 4.0-H: x + branch(x) * m
    sublayers = [("mixer_norm", "mixer", mixer, "x = x + self.mixer(self.mixer_norm(x), cache)")] if mixer is not None else []
    if mlp is not None:
        sublayers.append(("mlp_norm", "mlp", mlp, "x = x + self.mlp(self.mlp_norm(x))"))
    init, body = [], []
    for norm, name, cls, line in sublayers:
        init += [f"        self.{norm} = {fitted(norms[norm], len(f'        self.{norm} = '), 8)}", f"        self.{name} = {cls}(cfg)"]
        body.append(f"        {_scaled_branches(line) if multiplier is not None else line}")
    if multiplier is not None:
        field = em.field("residual_multiplier", multiplier, "each branch is multiplied by this before it is added")
        init.append(f"        self.residual_multiplier = {field}")
    if mixer is None:
        doc = "Pre-norm block of an MLP alone: x + mlp(norm(x))."
    else:
        doc = "Pre-norm block: x + mixer(norm(x))" + (", then x + mlp(norm(x))." if mlp is not None else ".")
    if multiplier is not None:
        doc = doc.rstrip(".") + "; each branch's output times residual_multiplier before it is added."
    given = ["the token embeddings"] * embeddings + (["the rotary tables" if rotary else "the score bias"] if rotary or bias else [])
    if given:
        doc += f" Given {' and '.join(given)} as the {'hybrid' if embeddings else 'attention'} blocks are; not used."
    cached = mixer is not None or stack.attrs.causal
    if mixer is None and cached:
        doc += " Given the layer's cache, None (it keeps nothing), as the other layers are given theirs."
    flags = {"banded": False, "nope": False, "chunked": False, "cross": False, "rotary": rotary, "bias": bias, "cached": cached,
             "embeddings": embeddings, "layer_scalar": False, "shortcut": False, "per_layer": False, "kv": False}
    names = {"Block": f"{camel(p)}Block", "DOC": docstring(doc, 4), "BlockCache": "MixerCache" if mixer is not None else "object",
             "BlockOutput": "torch.Tensor"}
    em.add(unit("blocks", "Block", flags, names, inserts={"modules": "\n".join(init), "body": "\n".join(body)}))
    return names["Block"]


def parallel_mixer_block_class(em: Emitter, stack: Component, p: str, attn: str, mixer: str, mlp: str | None,
                               norms: dict[str, str], rotary: bool = False, bias: bool = False) -> str:
    """A block of attention and a state mixer side by side on one norm, their outputs added to the residual, then an
    MLP (Falcon-H1's layer) (``templates/blocks.py``), with the attention's and the mixer's input and output
    multipliers where the spec gives them; forward takes the layer's ``ParallelCache`` (its keys and values, its
    state)."""
    from archcalc.codegen.cache import PARALLEL_CACHE

    if stack.attrs.residual_multiplier is not None:
        raise UnsupportedError("codegen: a residual multiplier in a block of attention and a mixer side by side is not "
                               "generated yet")
    kids = {c.name: c for c in stack.children}
    em.add(PARALLEL_CACHE, helper=True)
    args = (", window" if banded(stack) else "") + (", rotary=rotary" if unrotated(stack) else "")
    args += ", chunk=chunk" if chunked(stack) else ""
    init = [f"        self.norm = {fitted(norms['norm'], len('        self.norm = '), 8)}",
            f"        self.attn = {attn}(cfg{args})", f"        self.mixer = {mixer}(cfg)"]
    scaled = {}  # each branch's input and output: (source, multiplier field or None)
    for name, child in (("attn", kids["attn"]), ("mixer", kids["mixer"])):
        for end in ("in", "out"):
            value = getattr(child.attrs, f"{end}_multiplier")
            if value is not None:
                what = "input" if end == "in" else "output"
                field = em.field(f"{p}{name}_{end}_multiplier", float(value), f"the {name}'s {what} times this")
                init.append(f"        self.{name}_{end}_multiplier = {field}")
            scaled[name, end] = f" * self.{name}_{end}_multiplier" if value is not None else ""
    if mlp is not None:
        init += [f"        self.mlp_norm = {fitted(norms['mlp_norm'], len('        self.mlp_norm = '), 8)}",
                 f"        self.mlp = {mlp}(cfg)"]
    r = ", rope" if rotary else ", bias" if bias else ""
    body = ["kv, state = (cache.kv, cache.state) if cache is not None else (None, None)",
            "h = self.norm(x)",
            f"attn = self.attn(h{scaled['attn', 'in']}{r}, kv){scaled['attn', 'out']}",
            f"mixer = self.mixer(h{scaled['mixer', 'in']}, state){scaled['mixer', 'out']}",
            "x = x + (attn + mixer)"]
    doc = "Attention and a mixer side by side: x + attn(norm(x)) + mixer(norm(x))"
    if any(scaled.values()):
        doc += ", each branch's input and output times its multipliers"
    if mlp is not None:
        body.append("x = x + self.mlp(self.mlp_norm(x))")
        doc += "; then x + mlp(norm(x))"
    flags = {"banded": banded(stack), "nope": unrotated(stack), "chunked": chunked(stack), "cross": False,
             "rotary": rotary, "bias": bias, "cached": True, "embeddings": False, "layer_scalar": False, "shortcut": False,
             "per_layer": False, "kv": False}
    names = {"Block": f"{camel(p)}Block", "DOC": docstring(doc + ".", 4), "BlockCache": "ParallelCache",
             "BlockOutput": "torch.Tensor"}
    inserts = {"modules": "\n".join(init), "body": "\n".join(f"        {line}" for line in body)}
    em.add(unit("blocks", "Block", flags, names, inserts=inserts))
    return names["Block"]


def _residual(stack: Component, residual: str, cross: bool) -> tuple[str, list[str]]:
    """The block's doc and forward lines for its residual arrangement ({r}: the attention's extra arguments)."""
    doc, body = RESIDUAL[residual]
    if stack.attrs.residual_multiplier is not None:  # Granite: x + branch(x) * m
        if residual == "post-norm" or cross:
            raise UnsupportedError("codegen generates a residual multiplier in pre-norm, sandwich, reordered and parallel blocks only")
        doc = doc.rstrip(".") + "; each branch's output times residual_multiplier before it is added."
        body = [_scaled_branches(line) for line in body]
    if cross:
        if residual not in CROSS:
            raise UnsupportedError(f"codegen generates cross-attention in pre-norm and post-norm blocks only, not {residual}")
        doc = doc.replace(", then", ", then cross-attention to the encoder output, then")
        body = [body[0], CROSS[residual], *body[1:]]
    return doc, body


def _modules(stack: Component, attn: str, mlp: str, norms: dict[str, str], cross: str | None,
             moe: str | None = None) -> list[str]:
    """__init__'s lines that build the block's norms, attention and MLP, in the order they run."""
    init = []
    args = (", window" if banded(stack) else "") + (", rotary=rotary" if unrotated(stack) else "")
    args += ", chunk=chunk" if chunked(stack) else ""
    for child in sorted(stack.children, key=lambda c: BLOCK_ORDER.index(c.name) if c.name in BLOCK_ORDER else len(BLOCK_ORDER)):
        if child.name in norms:
            init.append(f"        self.{child.name} = {fitted(norms[child.name], len(f'        self.{child.name} = '), 8)}")
        elif child.name == "attn":
            init.append(f"        self.attn = {attn}(cfg{args})")
        elif child.name == "cross_attn" and cross is not None:
            init.append(f"        self.cross_attn = {cross}(cfg)")
        elif child.name == "mlp":
            init.append(f"        self.mlp = {mlp}(cfg)")
        elif child.name == "moe" and moe is not None:
            init.append(f"        self.moe = {moe}(cfg)")
    return init


def chunked(stack: Component) -> bool:
    """Does this stack have chunked layers (a token sees the earlier tokens of its own block of `chunk` tokens)?"""
    attn = next((c for c in stack.children if c.name == "attn"), None)
    return attn is not None and attn.attrs.chunked


def stack_init(em: Emitter, stack: Component, block: str, p: str, layers: str) -> list[str]:
    """The model's __init__ lines that build a stack's ModuleList, each layer with its window, rotary and chunk settings
    (the stack's patterns, repeating)."""
    if stack.find("shared") is not None:  # Zamba2's hybrid layers: the shared blocks, handed to them in turn
        return ["        # the shared transformer blocks: hybrid layer i runs shared[i % len(shared)]",
                "        shared = [SharedBlock(cfg) for _ in range(cfg.shared_blocks)]",
                f"        self.{stack.name} = nn.ModuleList(",
                f"            {block}(cfg, shared[i % len(shared)]) for i in range({layers})", "        )"]
    if not (banded(stack) or unrotated(stack) or chunked(stack)):
        one = f"        self.{stack.name} = nn.ModuleList({block}(cfg) for _ in range({layers}))"
        if len(one) <= 100:
            return [one]
        return [f"        self.{stack.name} = nn.ModuleList(", f"            {block}(cfg) for _ in range({layers})", "        )"]
    a = next(c for c in stack.children if c.name == "attn").attrs
    init, args = [], []
    if banded(stack):
        local = tuple(kind == "local" for kind in a.pattern)
        window = em.field(f"{p}window", a.window, f"{a.window}: tokens a local layer sees")
        init += ["        # the layer pattern: True = sliding-window layer, repeating", f"        local = {flat(local)}"]
        args.append(f"{window} if local[i % len(local)] else None")
    if unrotated(stack):
        init += ["        # False: a layer without rotary positions (NoPE), repeating", f"        rotated = {flat(a.rotary_pattern)}"]
        args.append("rotary=rotated[i % len(rotated)]")
    if chunked(stack):
        chunks = tuple(kind == "chunked" for kind in a.pattern)
        size = em.field(f"{p}chunk", a.chunk, f"{a.chunk}: tokens per block of a chunked layer")
        init += ["        # True: a layer that attends within blocks of `chunk` tokens, repeating", f"        chunked = {flat(chunks)}"]
        args.append(f"chunk={size} if chunked[i % len(chunked)] else None")
    one = f"            {block}(cfg, {', '.join(args)}) for i in range({layers})"
    if len(one) > 100:  # as ruff format writes it: the call one argument a line
        return init + [f"        self.{stack.name} = nn.ModuleList(", f"            {block}(",
                       *(f"                {arg}," for arg in ["cfg", *args]), "            )",
                       f"            for i in range({layers})", "        )"]
    return init + [f"        self.{stack.name} = nn.ModuleList(", one, "        )"]


def banded(stack: Component) -> bool:
    """Does this stack have sliding-window ('local') layers?"""
    attn = next((c for c in stack.children if c.name == "attn"), None)
    return attn is not None and attn.attrs.banded


def _scaled_branches(line: str) -> str:
    """``x = x + f(...) + g(...)`` as ``x = x + (f(...) + g(...)) * self.residual_multiplier``; other lines as they are."""
    if not line.startswith("x = x + "):
        return line
    branches = line[len("x = x + "):]
    return f"x = x + ({branches}) * self.residual_multiplier" if " + " in branches else f"x = x + {branches} * self.residual_multiplier"


def unrotated(stack: Component) -> bool:
    """Do some layers of this stack leave out rotary positions (NoPE layers)?"""
    attn = next((c for c in stack.children if c.name == "attn"), None)
    return attn is not None and False in attn.attrs.rotary_pattern


RELATIVE_BIAS = unit("towers", "RelativeBias")


def tower_class(em: Emitter, tower: Component, block: str, layers: str, final: str | None, rel_bias: bool) -> str:
    """The encoder or the decoder of an encoder-decoder model (``templates/towers.py``): its blocks, its position bias,
    its final norm. The decoder takes a cache for generation: a (self-attention, cross-attention) pair of KVCaches per
    block."""
    decoder = tower.name == "decoder"
    if rel_bias:
        em.add(RELATIVE_BIAS, helper=True)
    what = ("decoder: causal self-attention, cross-attention to the encoder output" if decoder
            else "encoder: bidirectional self-attention") + (", a relative position bias shared by its blocks" if rel_bias else "")
    what += ", a final norm" if final is not None else ""
    names = {"Block": block, "DOC": docstring(f"The {what}.", 4), f"cfg.{tower.name}_layers": layers}
    names |= {"FINAL_NORM": final} if final is not None else {}
    template = "Decoder" if decoder else "Encoder"
    em.add(unit("towers", template, {"rel_bias": rel_bias, "final_norm": final is not None}, names,
                drop=set() if rel_bias else {"bias"}))
    return camel(tower.name)
