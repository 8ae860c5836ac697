"""Source templates for the whole model: the ``Transformer`` class of a decoder, an encoder or an
encoder-decoder, with its initialisation (``reset_parameters``), ``forward`` (logits, and the loss when
given targets) and, for models that generate, ``new_cache`` and ``generate``.

Initialisation follows the spec's ``init`` section (transformers' ``_init_weights`` of the family): see
:func:`init_method`. Forward returns what transformers' model returns (logits, or BERT's hidden states);
with ``targets`` it returns ``(output, loss)``, the mean cross-entropy over positions whose target is not
-100 (decoders: next-token targets; encoders: masked-LM targets scored against the token embeddings;
encoder-decoders: the decoder's targets, transformers' ``labels``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from archcalc.ir import Component
from codegen.blocks import CHECKPOINTING, POOLER, interleaved, stack_init
from codegen.cache import SEQ2SEQ_GENERATE, SEQ2SEQ_NEW_CACHE, generate_method, new_cache_method
from codegen.init import init_method
from codegen.parts import norm_expr
from codegen.rotary import local_rotary

if TYPE_CHECKING:
    from codegen.emitter import Emitter

LOSS = "        loss = F.cross_entropy(logits.flatten(0, 1).float(), targets.flatten(), ignore_index=-100)  # mean over targets != -100"

# forward() checks what it is given by shape and dtype only: free, no value read (no wait for the device, no graph break
# under torch.compile). The ids' range needs their values (a reduction and a wait for the device): a decoder checks it
# once per generation, on the prompt, and never in a training step.
CHECK_TOKENS = '''def check_tokens(input_ids: torch.Tensor, targets: torch.Tensor | None = None, name: str = "input_ids") -> None:
    """One clear error for token ids forward() cannot use: input_ids (B, T) of int64 or int32, T >= 1; targets of the
    same shape, int64 (-100: no target). Shapes and dtypes only: reading the values would wait for the device."""
    token_ids = isinstance(input_ids, torch.Tensor) and input_ids.dtype in (torch.int64, torch.int32)
    if not token_ids or input_ids.dim() != 2 or input_ids.shape[1] < 1:
        raise ValueError(f"{name} must be a (B, T) tensor of token ids (int64 or int32) with T >= 1, got {described(input_ids)}")
    if targets is not None and not (isinstance(targets, torch.Tensor) and targets.dtype == torch.int64
                                    and targets.shape == input_ids.shape):
        raise ValueError(f"targets must be int64 token ids shaped like {name}, {tuple(input_ids.shape)} (-100: no target), "
                         f"got {described(targets)}")


def described(x) -> str:
    """A tensor's dtype and shape (anything else: its type), for an error message."""
    return f"{x.dtype} of shape {tuple(x.shape)}" if isinstance(x, torch.Tensor) else type(x).__name__'''

CHECK_VOCAB = '''def check_vocab(input_ids: torch.Tensor, vocab: int) -> None:
    """Token ids must lie in [0, vocab): one clear error instead of the embedding's index error (on a GPU, a device-side
    assert). It reads the values, a reduction and a wait for the device: forward calls it on a generation's prompt only."""
    if input_ids.numel() and not input_ids.is_meta:
        low, high = (int(v) for v in input_ids.aminmax())
        if low < 0 or high >= vocab:
            raise ValueError(f"token ids must lie in [0, {vocab}), the vocabulary; got ids from {low} to {high}")'''


def model_class(em: Emitter, stacks: list[tuple[Component, str]], final: Component | None, head: Component | None,
                rotary: bool = False, pooler: bool = False, token_types: bool = False, start: bool = False,
                alibi: bool = False, project_out: bool = False) -> str:
    """A decoder (causal: a KV cache and generate) or an encoder (hidden states, or a head's logits).
    ``start``: the embeddings take the position of the first token (learned positions in a decoder); ``alibi``: the
    blocks take ALiBi's score bias, computed once per forward (codegen.alibi); ``project_out``: the final hidden state
    is projected down to the token table's width before the head (OPT-350m)."""
    causal = all(stack.attrs.causal for stack, _ in stacks)
    init = ["        self.embed = Embeddings(cfg)"]
    own_local = rotary and local_rotary(em.lowered.root.find("embed"), [next(c for c in s.children if c.name == "attn") for s, _ in stacks])
    if rotary:
        init.append("        self.rotary = Rotary(cfg)  # no parameters, no buffers: the tables are computed in forward")
    if own_local:
        init.append("        self.rotary_local = LocalRotary(cfg)  # the sliding-window layers' own tables (their own base)")
    if alibi:
        init.append("        self.alibi = Alibi(cfg)  # no parameters, no buffers: the bias is computed in forward")
    for stack, block in stacks:
        p = f"{stack.name}_" if len(stacks) > 1 else ""
        layers = f"cfg.{p}layers"
        init += stack_init(em, stack, block, p, layers)
    if final is not None:
        init.append(f"        self.final_norm = {norm_expr(em, final, own=('norm_eps', 'final_norm_eps'))}")
    if pooler:
        em.add(POOLER)
        init.append("        self.pooler = Pooler(cfg)  # not part of forward: model.pooler(hidden) gives BERT's pooled output")
    names = [stack.name for stack, _ in stacks]
    ordered = interleaved(em, names)  # the stacks' layers interleaved: self.layer_list
    init += ordered
    blocks = f"self.{names[0]}" if len(names) == 1 else "self.layer_list" if ordered else "[" + ", ".join(f"*self.{n}" for n in names) + "]"
    signature = "input_ids: torch.Tensor" + (", token_type_ids: torch.Tensor | None = None" if token_types else "")
    signature += ", targets: torch.Tensor | None = None" + (", cache: list[KVCache] | None = None" if causal else "")
    em.add(CHECK_TOKENS, helper=True)
    forward = ["        check_tokens(input_ids, targets)  # shapes and dtypes: free"]
    if causal:
        em.add(CHECK_VOCAB, helper=True)
        forward += ["        if cache is not None and cache[0].seen == 0:  # a generation's prompt: the ids' range, once",
                    "            check_vocab(input_ids, self.cfg.vocab)"]
    if causal and (rotary or start or alibi):
        forward.append("        start = cache[0].seen if cache is not None else 0  # the position of the first of these tokens")
    forward.append(f"        x = self.embed(input_ids{', token_type_ids' if token_types else ''}{', start' if start else ''})  # (B, T, d)")
    if rotary:
        forward.append("        rope = self.rotary(start, input_ids.shape[1], input_ids.device)  # (cos, sin), each (T, rotary_width)")
    if alibi:
        forward.append("        bias = self.alibi(start, input_ids.shape[1], x.device, x.dtype)  # (1, H, T, S), with the causal mask")
    if own_local:
        forward.append("        rope_local = self.rotary_local(start, input_ids.shape[1], input_ids.device)  # the sliding layers' tables")
    args = "x, layer_rope" if own_local else "x, rope" if rotary else "x, bias" if alibi else "x"
    pick = ["            layer_rope = rope_local if block.attn.window is not None else rope  # a sliding layer: its own tables"] if own_local else []
    if len(names) > 1:
        forward.append(f"        blocks = {blocks}  # every layer, in order")
        blocks = "blocks"
    if causal:
        forward += [f"        caches = cache if cache is not None else [None] * len({blocks})",
                    f"        for block, layer_cache in zip({blocks}, caches, strict=True):", *pick,
                    "            if self.checkpointing and layer_cache is None:  # training: keep the block's input, recompute the rest",
                    f"                x = checkpoint(block, {args}, use_reentrant=False)",
                    "            else:",
                    f"                x = block({args}, layer_cache)"]
    else:
        forward += [f"        for block in {blocks}:", *pick,
                    f"            x = checkpoint(block, {args}, use_reentrant=False) if self.checkpointing else block({args})"]
    if final is not None:
        forward.append("        x = self.final_norm(x)")
    if project_out:
        init.append("        self.project_out = nn.Linear(cfg.width, cfg.token_width, bias=False)  # down to the token table's width")
        forward.append("        x = self.project_out(x)  # (B, T, token_width)")
    if causal:
        forward += ["        if cache is not None:", "            x = x[:, -1:]  # generating: only the next token's logits are needed"]
    if head is not None:
        head_init, head_forward = head_lines(em, head)
        init += head_init
        forward += head_forward + ["        if targets is None:", "            return logits", LOSS, "        return logits, loss"]
    else:
        forward += ["        if targets is None:", "            return x  # (B, T, d): the hidden states",
                    "        # masked LM: the hidden states scored against the token embeddings (BertModel has no MLM head to use)",
                    "        logits = x @ self.embed.token.weight.T  # (B, T, V)", LOSS, "        return x, loss"]
    what = "embeddings, blocks" + (", final norm" if final is not None else "") + (", projection down" if project_out else "")
    what += ", head" if head is not None else ""
    if causal:
        doc = ['        """Next-token logits (B, T, V) of input_ids (B, T); given targets (B, T), the token that should follow each',
               "        position (-100: none), also their mean cross-entropy: (logits, loss). With a cache (see generate), the tokens",
               '        continue the cached ones and only the last position\'s logits come back: (B, 1, V)."""']
    elif head is not None:
        doc = ['        """Logits (B, T, V) of input_ids (B, T); given targets (B, T) (-100: no target), also their mean',
               '        cross-entropy: (logits, loss)."""']
    else:
        doc = ['        """Hidden states (B, T, d) of input_ids (B, T); given targets (B, T), the original tokens at masked positions',
               "        (-100 elsewhere), also the masked-LM cross-entropy of the hidden states against the token embeddings:",
               '        (hidden, loss)."""']
    methods = [new_cache_method(names, bool(ordered)), generate_method(start, _longrope_rerun(em))] if causal else []
    layers = " + ".join(f"self.cfg.{stack.name}_layers" for stack, _ in stacks) if len(stacks) > 1 else "self.cfg.layers"
    return _transformer(em, what, init, signature, doc + forward, layers, methods, tied=_tied(head))


def _longrope_rerun(em: Emitter) -> bool:
    """Does generate() run the sequence again past LongRoPE's original context, as transformers' model of this type does?"""
    from codegen.hf_maps import MAPS

    scaling = em.lowered.root.find("embed").attrs.rotary_scaling
    hf = em.lowered.binding.spec.hf
    return (scaling is not None and scaling.type == "longrope" and hf is not None and hf.model_type in MAPS
            and MAPS[hf.model_type].longrope_rerun)


def head_lines(em: Emitter, head: Component) -> tuple[list[str], list[str]]:
    """The head's lines in the model's __init__ and forward (from the final hidden state x to ``logits``)."""
    init, forward = [], []
    bias = any(t.name == "bias" for t in head.tensors)
    width = "cfg.token_width" if "token_width" in em.fields else "cfg.width"  # OPT-350m: the token table's width
    init.append(f"        self.head = nn.Linear({width}, cfg.vocab, bias={bias})")
    if _tied(head):
        init.append("        self.head.weight = self.embed.token.weight  # tied: one matrix, counted once")
    if head.attrs.scale_input:
        init.append("        self.head_scale = cfg.width**-0.5  # T5 v1.0 scales the decoder output by d**-0.5 before the tied head")
        forward.append("        x = x * self.head_scale")
    forward.append("        logits = self.head(x)  # (B, T, V)")
    if head.attrs.multiplier is not None:
        multiplier = em.field("logit_multiplier", head.attrs.multiplier, "the logits are multiplied by this")
        init.append(f"        self.logit_multiplier = {multiplier}  # Cohere's logit_scale; Granite's 1 / logits_scaling")
        forward.append("        logits = logits * self.logit_multiplier")
    if head.attrs.softcap is not None:
        cap = em.field("logit_softcap", float(head.attrs.softcap), "logits are capped to (-cap, cap) by cap * tanh(z / cap)")
        init.append(f"        self.softcap = {cap}")
        forward.append("        logits = self.softcap * torch.tanh(logits / self.softcap)  # soft-capped logits")
    return init, forward


def _tied(head: Component | None) -> bool:
    return head is not None and any(t.name == "weight" and t.tied_to is not None for t in head.tensors)


def seq2seq_model_class(em: Emitter, encoder: str, decoder: str, head: Component | None, start: bool) -> str:
    """The encoder-decoder model: one embedding for both towers, the encoder, the decoder, the head.
    ``start``: the embeddings take the position of the first token (sinusoidal positions)."""
    init = ["        self.embed = Embeddings(cfg)  # shared by the encoder and the decoder",
            f"        self.encoder = {encoder}(cfg)", f"        self.decoder = {decoder}(cfg)"]
    assert head is not None, "encoder-decoder models have a head"
    em.add(CHECK_TOKENS, helper=True)
    head_init, head_forward = head_lines(em, head)
    forward = [
        '        """Logits (B, T, V) of the decoder tokens decoder_input_ids (B, T) given the encoder tokens input_ids (B, S);',
        "        given targets (B, T), the token each decoder position should produce (transformers' labels; decoder_input_ids",
        '        are usually the targets shifted right behind the start token), also their mean cross-entropy: (logits, loss)."""',
        "        check_tokens(input_ids)  # shapes and dtypes: free",
        '        check_tokens(decoder_input_ids, targets, "decoder_input_ids")',
        "        memory = self.encoder(self.embed(input_ids))  # (B, S, d)",
        "        logits = self.decode(decoder_input_ids, memory)",
        "        if targets is None:", "            return logits", LOSS, "        return logits, loss",
        "",
        "    def decode(self, decoder_input_ids: torch.Tensor, memory: torch.Tensor,",
        "               cache: list[tuple[KVCache, KVCache]] | None = None) -> torch.Tensor:",
        '        """The decoder\'s logits (B, T, V) of decoder_input_ids (B, T) over the encoder output memory (B, S, d). With a',
        '        cache (see generate), the tokens continue the cached ones and only the last position\'s logits come back."""',
        *(["        start = cache[0][0].seen if cache is not None else 0  # the position of the first of these tokens"] if start else []),
        f"        x = self.decoder(self.embed(decoder_input_ids{', start' if start else ''}), memory, cache)  # (B, T, d)",
        "        if cache is not None:", "            x = x[:, -1:]  # generating: only the next token's logits are needed",
        *head_forward, "        return logits",
    ]
    properties = [
        "    @property",
        "    def checkpointing(self) -> bool:",
        '        """True: both towers keep only each block\'s input and recompute the rest in backward."""',
        "        return self.encoder.checkpointing and self.decoder.checkpointing",
        "",
        "    @checkpointing.setter",
        "    def checkpointing(self, on: bool) -> None:",
        "        self.encoder.checkpointing = self.decoder.checkpointing = on",
    ]
    em.add(CHECK_VOCAB, helper=True)  # generate() checks the ids' range once
    signature = "input_ids: torch.Tensor, decoder_input_ids: torch.Tensor, targets: torch.Tensor | None = None"
    layers = "(self.cfg.encoder_layers + self.cfg.decoder_layers)"
    return _transformer(em, "one embedding, the encoder, the decoder, head", init + head_init, signature, forward, layers,
                        [SEQ2SEQ_NEW_CACHE, SEQ2SEQ_GENERATE, "\n".join(properties)], towers=True, tied=_tied(head))


def _transformer(em: Emitter, what: str, init: list[str], signature: str, forward: list[str], layers: str,
                 methods: list[str], towers: bool = False, tied: bool = False) -> str:
    """The Transformer class; ``towers``: the blocks live in an encoder and a decoder (``checkpointing`` is a property
    in ``methods`` that switches both); ``layers``: the source of the number of blocks (for depth-scaled init)."""
    returns = "torch.Tensor | tuple[torch.Tensor, torch.Tensor]"
    lines = [
        "class Transformer(nn.Module):",
        f'    """The whole model: {what}."""',
        "",
        "    def __init__(self, cfg: Config = Config()):",
        "        super().__init__()",
        "        self.cfg = cfg",
        *([] if towers else [CHECKPOINTING]),
        *init,
        "        if not self.embed.token.weight.is_meta:  # on the meta device there are only shapes: nothing to initialise",
        "            self.reset_parameters()",
        "",
        *init_method(em, layers, tied),
        "",
        f"    def forward(self, {signature}) -> {returns}:",
        *forward,
    ]
    for method in methods:
        lines += ["", method]
    return "\n".join(lines)
