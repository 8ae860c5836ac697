"""The vision tower and multimodal projector of a multimodal wrapper config (``--with-vision``), counted by tensor.

A wrapper config (Gemma 3's ``gemma3``, Qwen3.5's ``qwen3_5``, Mistral 3's ``mistral3``, Gemma 4's ``gemma4``) holds
its text model in ``text_config``, which the import counts, and its image encoder in ``vision_config``. Where that
encoder is a plain ViT, :data:`ENCODERS` lists, as data, every parameter tensor transformers' modeling file builds
for it: its path (as in transformers' ``state_dict``, under ``model.``, layer indices left out), its shape as an
expression over symbols read from the config, how many layers repeat it, and when it exists. Nothing else is read:
no torch, no transformers. Buffers (rotary tables, clipping bounds, standardization statistics) are not counted.

The projector is what maps the encoder's output to the text model's width: Gemma 3's ``multi_modal_projector``,
Mistral 3's (its patch merger included), Gemma 4's ``embed_vision`` and Qwen3.5's ``visual.merger``.

>>> from archcalc.hf.jsonfile import ConfigFile
>>> vc = vision_count(ConfigFile("c.json", {"model_type": "gemma3", "text_config": {"model_type": "gemma3_text",
...     "hidden_size": 64}, "vision_config": {"model_type": "siglip_vision_model", "hidden_size": 32,
...     "intermediate_size": 48, "num_hidden_layers": 2, "image_size": 64, "patch_size": 16, "vision_use_head": False}}))
>>> vc.totals(), str(vc.formula("projector"))
({'vision_tower': 40192, 'projector': 2080}, 'd_t*d_v + d_v')
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cache
from typing import Any

import sympy

from archcalc.errors import SpecError
from archcalc.hf.jsonfile import ConfigFile
from archcalc.hf.reader import MISSING, Reader
from archcalc.spec.expr import Expr, parse, symbol

PARTS = ("vision_tower", "projector")  # the two components, as count's by_role names them


@dataclass(frozen=True)
class Encoder:
    """One kind of image encoder, as data: the symbols its shapes use and its tensors.

    ``symbols``: name -> (section, config key(s) ``a|b`` in the order tried, class default, reading); the section is
    ``vision`` (vision_config), ``text`` (text_config; default: the text model's class default) or ``wrapper``; a
    reading is ``int``, ``bool`` or ``count`` (an int means 1 feature layer, a list its length).
    ``tensors``: (part, path, shape, repeat, present when), ``{a,b}`` in a path naming several tensors of one shape.
    ``absent``: the defaults transformers uses when the wrapper config has no vision_config at all (Mistral 3's
    differ from the vision config class's); None: then there is no vision tower (Gemma 4's is optional).
    """

    title: str
    wrappers: tuple[str, ...]
    vision_types: tuple[str, ...]
    symbols: dict[str, tuple[str, str, Any, str]]
    tensors: tuple[tuple[str, str, str, str, str], ...]
    absent: dict[str, Any] | None = field(default_factory=dict)
    source: str = ""


# SiglipVisionModel (siglip/modeling_siglip.py) and Gemma3MultiModalProjector (gemma3/modeling_gemma3.py).
SIGLIP = Encoder(
    title="SigLIP ViT", wrappers=("gemma3",), vision_types=("siglip_vision_model",),
    source="transformers SiglipVisionModel + Gemma3MultiModalProjector",
    symbols={
        "d_v": ("vision", "hidden_size", 768, "int"), "f_v": ("vision", "intermediate_size", 3072, "int"),
        "L_v": ("vision", "num_hidden_layers", 12, "int"), "C": ("vision", "num_channels", 3, "int"),
        "I": ("vision", "image_size", 224, "int"), "p": ("vision", "patch_size", 16, "int"),
        "pool_head": ("vision", "vision_use_head", True, "bool"), "d_t": ("text", "hidden_size", None, "int"),
    },
    tensors=(
        ("vision_tower", "vision_tower.embeddings.patch_embedding.weight", "d_v, C, p, p", "1", ""),
        ("vision_tower", "vision_tower.embeddings.patch_embedding.bias", "d_v", "1", ""),
        ("vision_tower", "vision_tower.embeddings.position_embedding.weight", "(I // p) ** 2, d_v", "1", ""),
        ("vision_tower", "vision_tower.encoder.layers.self_attn.{k,v,q,out}_proj.weight", "d_v, d_v", "L_v", ""),
        ("vision_tower", "vision_tower.encoder.layers.self_attn.{k,v,q,out}_proj.bias", "d_v", "L_v", ""),
        ("vision_tower", "vision_tower.encoder.layers.layer_norm1.{weight,bias}", "d_v", "L_v", ""),
        ("vision_tower", "vision_tower.encoder.layers.mlp.fc1.weight", "f_v, d_v", "L_v", ""),
        ("vision_tower", "vision_tower.encoder.layers.mlp.fc1.bias", "f_v", "L_v", ""),
        ("vision_tower", "vision_tower.encoder.layers.mlp.fc2.weight", "d_v, f_v", "L_v", ""),
        ("vision_tower", "vision_tower.encoder.layers.mlp.fc2.bias", "d_v", "L_v", ""),
        ("vision_tower", "vision_tower.encoder.layers.layer_norm2.{weight,bias}", "d_v", "L_v", ""),
        ("vision_tower", "vision_tower.post_layernorm.{weight,bias}", "d_v", "1", ""),
        # the attention-pooling head (vision_use_head): built, though Gemma 3 reads the last hidden state
        ("vision_tower", "vision_tower.head.probe", "1, 1, d_v", "1", "pool_head"),
        ("vision_tower", "vision_tower.head.attention.in_proj_weight", "3 * d_v, d_v", "1", "pool_head"),
        ("vision_tower", "vision_tower.head.attention.in_proj_bias", "3 * d_v", "1", "pool_head"),
        ("vision_tower", "vision_tower.head.attention.out_proj.weight", "d_v, d_v", "1", "pool_head"),
        ("vision_tower", "vision_tower.head.{attention.out_proj.bias,layernorm.weight,layernorm.bias}", "d_v", "1",
         "pool_head"),
        ("vision_tower", "vision_tower.head.mlp.fc1.weight", "f_v, d_v", "1", "pool_head"),
        ("vision_tower", "vision_tower.head.mlp.fc1.bias", "f_v", "1", "pool_head"),
        ("vision_tower", "vision_tower.head.mlp.fc2.weight", "d_v, f_v", "1", "pool_head"),
        ("vision_tower", "vision_tower.head.mlp.fc2.bias", "d_v", "1", "pool_head"),
        ("projector", "multi_modal_projector.mm_input_projection_weight", "d_v, d_t", "1", ""),
        ("projector", "multi_modal_projector.mm_soft_emb_norm.weight", "d_v", "1", ""),
    ),
)

# Qwen3_5VisionModel (qwen3_5/modeling_qwen3_5.py; Qwen3.5-MoE's is the same): a ViT with a 3-D patch convolution,
# learned positions, and a patch merger (counted as the projector) to out_hidden_size; no deepstack mergers.
QWEN3_5 = Encoder(
    title="Qwen3.5 ViT", wrappers=("qwen3_5", "qwen3_5_moe"),
    vision_types=("qwen3_5", "qwen3_5_vision", "qwen3_5_moe", "qwen3_5_moe_vision"),
    source="transformers Qwen3_5VisionModel (its merger: the projector)",
    symbols={
        "d_v": ("vision", "hidden_size", 1152, "int"), "f_v": ("vision", "intermediate_size", 4304, "int"),
        "L_v": ("vision", "depth|num_hidden_layers", 27, "int"), "C": ("vision", "in_channels", 3, "int"),
        "p": ("vision", "patch_size", 16, "int"), "p_t": ("vision", "temporal_patch_size", 2, "int"),
        "m": ("vision", "spatial_merge_size", 2, "int"), "d_o": ("vision", "out_hidden_size", 3584, "int"),
        "P": ("vision", "num_position_embeddings", 2304, "int"),
    },
    tensors=(
        ("vision_tower", "visual.patch_embed.proj.weight", "d_v, C, p_t, p, p", "1", ""),
        ("vision_tower", "visual.patch_embed.proj.bias", "d_v", "1", ""),
        ("vision_tower", "visual.pos_embed.weight", "P, d_v", "1", ""),
        ("vision_tower", "visual.blocks.norm1.{weight,bias}", "d_v", "L_v", ""),
        ("vision_tower", "visual.blocks.norm2.{weight,bias}", "d_v", "L_v", ""),
        ("vision_tower", "visual.blocks.attn.qkv.weight", "3 * d_v, d_v", "L_v", ""),
        ("vision_tower", "visual.blocks.attn.qkv.bias", "3 * d_v", "L_v", ""),
        ("vision_tower", "visual.blocks.attn.proj.weight", "d_v, d_v", "L_v", ""),
        ("vision_tower", "visual.blocks.attn.proj.bias", "d_v", "L_v", ""),
        ("vision_tower", "visual.blocks.mlp.linear_fc1.weight", "f_v, d_v", "L_v", ""),
        ("vision_tower", "visual.blocks.mlp.linear_fc1.bias", "f_v", "L_v", ""),
        ("vision_tower", "visual.blocks.mlp.linear_fc2.weight", "d_v, f_v", "L_v", ""),
        ("vision_tower", "visual.blocks.mlp.linear_fc2.bias", "d_v", "L_v", ""),
        ("projector", "visual.merger.norm.{weight,bias}", "d_v", "1", ""),
        ("projector", "visual.merger.linear_fc1.weight", "d_v * m ** 2, d_v * m ** 2", "1", ""),
        ("projector", "visual.merger.linear_fc1.bias", "d_v * m ** 2", "1", ""),
        ("projector", "visual.merger.linear_fc2.weight", "d_o, d_v * m ** 2", "1", ""),
        ("projector", "visual.merger.linear_fc2.bias", "d_o", "1", ""),
    ),
)

# PixtralVisionModel (pixtral/modeling_pixtral.py) and Mistral3MultiModalProjector (mistral3/modeling_mistral3.py).
PIXTRAL = Encoder(
    title="Pixtral ViT", wrappers=("mistral3",), vision_types=("pixtral",),
    source="transformers PixtralVisionModel + Mistral3MultiModalProjector",
    symbols={
        "d_v": ("vision", "hidden_size", 1024, "int"), "f_v": ("vision", "intermediate_size", 4096, "int"),
        "L_v": ("vision", "num_hidden_layers", 24, "int"), "C": ("vision", "num_channels", 3, "int"),
        "p": ("vision", "patch_size", 16, "int"), "m": ("wrapper", "spatial_merge_size", 2, "int"),
        "n_f": ("wrapper", "vision_feature_layer", -1, "count"),
        "proj_bias": ("wrapper", "multimodal_projector_bias", False, "bool"), "d_t": ("text", "hidden_size", None, "int"),
    },
    absent={"patch_size": 14},  # Mistral3Config's vision_config defaults beside PixtralVisionConfig's
    tensors=(
        ("vision_tower", "vision_tower.patch_conv.weight", "d_v, C, p, p", "1", ""),
        ("vision_tower", "vision_tower.ln_pre.weight", "d_v", "1", ""),
        ("vision_tower", "vision_tower.transformer.layers.{attention_norm,ffn_norm}.weight", "d_v", "L_v", ""),
        ("vision_tower", "vision_tower.transformer.layers.attention.{k,v,q,o}_proj.weight", "d_v, d_v", "L_v", ""),
        ("vision_tower", "vision_tower.transformer.layers.feed_forward.{gate,up}_proj.weight", "f_v, d_v", "L_v", ""),
        ("vision_tower", "vision_tower.transformer.layers.feed_forward.down_proj.weight", "d_v, f_v", "L_v", ""),
        ("projector", "multi_modal_projector.norm.weight", "d_v", "1", ""),
        ("projector", "multi_modal_projector.patch_merger.merging_layer.weight", "d_v, d_v * m ** 2", "1", ""),
        ("projector", "multi_modal_projector.linear_1.weight", "d_t, d_v * n_f", "1", ""),
        ("projector", "multi_modal_projector.linear_1.bias", "d_t", "1", "proj_bias"),
        ("projector", "multi_modal_projector.linear_2.weight", "d_t, d_t", "1", ""),
        ("projector", "multi_modal_projector.linear_2.bias", "d_t", "1", "proj_bias"),
    ),
)

# Gemma4VisionModel and Gemma4MultimodalEmbedder (gemma4/modeling_gemma4.py): a ViT of RMS-normed layers with
# QK-norm and a gated MLP, a linear patch embedding and a 2-D table of learned positions.
GEMMA4 = Encoder(
    title="Gemma 4 ViT", wrappers=("gemma4",), vision_types=("gemma4_vision",), absent=None,
    source="transformers Gemma4VisionModel + Gemma4MultimodalEmbedder (embed_vision)",
    symbols={
        "d_v": ("vision", "hidden_size", 768, "int"), "f_v": ("vision", "intermediate_size", 3072, "int"),
        "L_v": ("vision", "num_hidden_layers", 16, "int"), "H_v": ("vision", "num_attention_heads", 12, "int"),
        "K_v": ("vision", "num_key_value_heads", 12, "int"), "h_v": ("vision", "head_dim", 64, "int"),
        "p": ("vision", "patch_size", 16, "int"), "P": ("vision", "position_embedding_size", 10240, "int"),
        "d_t": ("text", "hidden_size", None, "int"),
    },
    tensors=(
        ("vision_tower", "vision_tower.patch_embedder.input_proj.weight", "d_v, 3 * p ** 2", "1", ""),
        ("vision_tower", "vision_tower.patch_embedder.position_embedding_table", "2, P, d_v", "1", ""),
        ("vision_tower", "vision_tower.encoder.layers.self_attn.q_proj.linear.weight", "H_v * h_v, d_v", "L_v", ""),
        ("vision_tower", "vision_tower.encoder.layers.self_attn.{k,v}_proj.linear.weight", "K_v * h_v, d_v", "L_v", ""),
        ("vision_tower", "vision_tower.encoder.layers.self_attn.o_proj.linear.weight", "d_v, H_v * h_v", "L_v", ""),
        ("vision_tower", "vision_tower.encoder.layers.self_attn.{q,k}_norm.weight", "h_v", "L_v", ""),
        ("vision_tower", "vision_tower.encoder.layers.mlp.{gate,up}_proj.linear.weight", "f_v, d_v", "L_v", ""),
        ("vision_tower", "vision_tower.encoder.layers.mlp.down_proj.linear.weight", "d_v, f_v", "L_v", ""),
        ("vision_tower", "vision_tower.encoder.layers.{input_layernorm,post_attention_layernorm,pre_feedforward_layernorm,"
         "post_feedforward_layernorm}.weight", "d_v", "L_v", ""),
        ("projector", "embed_vision.embedding_projection.weight", "d_t, d_v", "1", ""),
    ),
)

ENCODERS = (SIGLIP, QWEN3_5, PIXTRAL, GEMMA4)
WRAPPERS = {w: e for e in ENCODERS for w in e.wrappers}
_SECTIONS = {"vision": ("vision_config",), "text": ("text_config",), "wrapper": ()}


@dataclass(frozen=True)
class VisionTensor:
    """One tensor of the vision tower or the projector: ``shape`` over the encoder's symbols, held ``repeat`` times."""

    part: str
    path: str
    shape: tuple[sympy.Expr, ...]
    repeat: sympy.Expr

    @property
    def count(self) -> sympy.Expr:
        return self.repeat * sympy.Mul(*self.shape)


@dataclass(frozen=True)
class VisionCount:
    """The vision tower and projector of one config: its tensors and the values of their symbols."""

    model_type: str
    encoder: Encoder
    values: dict[str, int]  # every int symbol's value (the bool switches only choose tensors)
    tensors: tuple[VisionTensor, ...]
    notes: tuple[str, ...] = ()

    @property
    def numeric(self) -> dict[sympy.Symbol, sympy.Integer]:
        return {symbol(k): sympy.Integer(v) for k, v in self.values.items()}

    def formula(self, part: str | None = None) -> sympy.Expr:
        """The parameters of ``part`` (default: both) as a polynomial in the encoder's symbols."""
        return sympy.expand(sympy.Add(*(t.count for t in self.tensors if part in (None, t.part))))

    def totals(self) -> dict[str, int]:
        """The parameters of each part, exactly."""
        return {part: int(self.formula(part).xreplace(self.numeric)) for part in PARTS}

    def by_path(self) -> dict[str, int]:
        return {t.path: int(t.count.xreplace(self.numeric)) for t in self.tensors}

    def tensors_json(self) -> list[dict]:
        """The tensors as count's ``--json`` lists a model's (role: the part)."""
        return [{"path": t.path, "role": t.part, "shape": [int(s.xreplace(self.numeric)) for s in t.shape],
                 "shape_formula": [str(s) for s in t.shape], "repeat": int(t.repeat.xreplace(self.numeric)),
                 "count": int(t.count.xreplace(self.numeric))} for t in self.tensors]

    def to_json(self) -> dict:
        totals = self.totals()
        return {"model_type": self.model_type, "encoder": self.encoder.title, "source": self.encoder.source,
                "values": dict(self.values), **totals, "total": sum(totals.values()),
                "formula": str(self.formula()), **{f"{part}_formula": str(self.formula(part)) for part in PARTS},
                "notes": list(self.notes)}


def vision_count(cf: ConfigFile) -> VisionCount:
    """The vision tower and projector of the wrapper config ``cf``; a SpecError at the offending key where its wrapper
    or its encoder is not modelled."""
    outer = cf.data.get("model_type")
    inner = cf.data.get("text_config")
    if not isinstance(inner, dict) or not isinstance(outer, str):
        shown = f"model_type {str(outer)[:60]!r}" if outer is not None else "this config"
        raise SpecError.at(cf.where(("model_type",)), f"--with-vision counts the vision tower of a multimodal wrapper "
                           f"config ({', '.join(sorted(WRAPPERS))}); {shown} has no text_config: a text model, with none")
    encoder = WRAPPERS.get(outer)
    if encoder is None:
        raise SpecError.at(cf.where(("model_type",), value=True),
                           f"model_type: {outer[:60]!r}: its vision tower is not modelled; --with-vision counts those "
                           f"of {', '.join(sorted(WRAPPERS))}")
    r = Reader(cf, outer)
    vision = r.get("vision_config")
    if vision is not MISSING and vision is not None and not isinstance(vision, dict):
        raise r.fail("vision_config", f"expected an object (the vision encoder's config), got {type(vision).__name__}")
    if not isinstance(vision, dict) and encoder.absent is None:  # transformers builds no vision tower
        return VisionCount(outer, encoder, {}, (), (f"{outer} without a vision_config has no vision tower",) + _notes(r, outer))
    kind = vision.get("model_type") if isinstance(vision, dict) else None
    if kind is not None and kind not in encoder.vision_types:
        raise r.fail(("vision_config", "model_type"), f"{str(kind)[:60]!r} is not the encoder modelled for {outer}'s "
                     f"vision tower; expected {' or '.join(encoder.vision_types)}")
    absent = encoder.absent if not isinstance(vision, dict) else {}
    values = {name: _read(r, cf, spec, absent or {}) for name, spec in encoder.symbols.items()}
    ints = {k: v for k, v in values.items() if not isinstance(v, bool)}
    return VisionCount(outer, encoder, ints, _tensors(encoder, values), _notes(r, outer))


def _read(r: Reader, cf: ConfigFile, spec: tuple[str, str, Any, str], absent: dict[str, Any]) -> Any:
    """One symbol's value: the first of its keys the config holds, else its default."""
    section, keys, default, reading = spec
    base = _SECTIONS[section]
    if section == "text":
        default = _text_default(str(cf.data["text_config"].get("model_type")), keys)
    first = keys.split("|")[0]
    if section == "vision":
        default = absent.get(first, default)
    key = next((base + (k,) for k in keys.split("|") if r.get(base + (k,)) is not MISSING), base + (first,))
    if reading == "bool":
        return r.bool(key, default)
    if reading == "count":  # vision_feature_layer: one layer's index, or a list of them
        value = r.get(key)
        if isinstance(value, list):
            if not value or len(value) > 1024:
                raise r.fail(key, f"expected a layer index or a list of 1 to 1024 of them, got a list of {len(value)}")
            return len(value)
        if value is not MISSING and (isinstance(value, bool) or not isinstance(value, int)):
            raise r.fail(key, f"expected a layer index or a list of them, got {type(value).__name__}")
        return 1
    value = r.int(key, default)
    if value is None:
        raise r.fail(key, "expected an integer, and the text model's class gives no default for it")
    return value


def _text_default(model_type: str, key: str) -> Any:
    from archcalc.hf.build import family_of  # build imports the readers; imported here, it imports this module late

    family = family_of(model_type)
    return family.defaults().get(key) if family is not None else None


def _tensors(encoder: Encoder, values: dict[str, Any]) -> tuple[VisionTensor, ...]:
    """The encoder's tensors that exist for ``values`` (their switches on), in the table's order."""
    kinds = {name: "bool" if isinstance(v, bool) else "int" for name, v in values.items()}
    out = []
    for part, path, shape, repeat, when in encoder.tensors:
        if when and not _expr(when, kinds, "bool").evaluate(values):
            continue
        dims = tuple(_expr(s.strip(), kinds, "int").to_sympy() for s in shape.split(","))
        for name in _expand(path):
            out.append(VisionTensor(part, name, dims, _expr(repeat, kinds, "int").to_sympy()))
    return tuple(out)


@cache
def _parsed(text: str, kinds: tuple[tuple[str, str], ...], want: str) -> Expr:
    return parse(text, dict(kinds), want)  # type: ignore[arg-type]


def _expr(text: str, kinds: dict[str, str], want: str) -> Expr:
    return _parsed(text, tuple(sorted(kinds.items())), want)


def _expand(path: str) -> list[str]:
    """``a.{b,c}.d`` -> ``a.b.d``, ``a.c.d`` (one brace group)."""
    m = re.search(r"\{([^{}]*)\}", path)
    if m is None:
        return [path]
    return [path[:m.start()] + alt + path[m.end():] for alt in m.group(1).split(",")]


def _notes(r: Reader, outer: str) -> tuple[str, ...]:
    """What the count leaves out of the wrapper beside the text model, tower and projector."""
    audio = r.get("audio_config")
    if audio is not MISSING and audio is not None:
        return (f"{outer}'s audio tower and its embedder (audio_config) are not counted",)
    return ()
