"""Speculative decoding with the model's own MTP modules as the draft (DeepSeek-V3, GLM-4.5): roofline bounds.

Each iteration drafts ``k`` tokens with the MTP module (module ``i mod modules`` for draft ``i``: with k above the
number of modules the modules are reused, as DeepSeek's and vLLM's MTP drafting reuse their one module), then one
target step verifies them. With each drafted token accepted with probability ``alpha``, independently, an iteration
yields (1 - alpha^(k+1)) / (1 - alpha) tokens on average (Leviathan et al. 2023, "Fast Inference from Transformers
via Speculative Decoding", eq. 1). Costs, per sequence position, at the average plain decode step of the run:

- plain step: the model's decode step (weights read once for B tokens, the KV cache read);
- verify step: the same reads once, for B·(k+1) tokens (a mixture of experts reaches more experts), k + 1 tokens'
  FLOPs, KV writes and activations;
- draft step: what the MTP module adds to a decode step (its weights, its KV cache, its FLOPs), exactly the difference
  of the model with and without it, plus a re-read of the head it shares with the model.

Each step takes max(FLOPs / peak, bytes / bandwidth) / tp; speed-up = tokens per iteration × plain step /
(verify step + k × draft step). All exact fractions.

>>> expected_tokens(Fraction(1, 2), 1), expected_tokens(Fraction(0), 3)
(Fraction(3, 2), Fraction(1, 1))
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from archcalc.errors import UsageError


def expected_tokens(alpha: Fraction, k: int) -> Fraction:
    """Tokens one iteration yields on average: 1 + alpha + ... + alpha^k = (1 - alpha^(k+1)) / (1 - alpha)."""
    return (1 - alpha ** (k + 1)) / (1 - alpha)


def parse_alpha(text: str) -> Fraction:
    """``--mtp-acceptance``: a number in [0, 1) read exactly (``0.8`` is 4/5; ``7/8`` works too)."""
    try:
        alpha = Fraction(text)
    except (ValueError, ZeroDivisionError):
        raise UsageError(f"archcalc infer: --mtp-acceptance {text!r}: expected a number in [0, 1) such as 0.8 or 7/8") from None
    if not 0 <= alpha < 1:
        raise UsageError(f"archcalc infer: --mtp-acceptance {text!r}: expected an acceptance rate in [0, 1) (1 would accept every "
                         "draft forever)")
    return alpha


@dataclass(frozen=True)
class Step:
    flops: Fraction
    bytes: Fraction
    seconds: Fraction
    bound: str

    def to_json(self) -> dict:
        return {"flops": _exact(self.flops), "bytes": _exact(self.bytes), "seconds": _exact(self.seconds),
                "seconds_float": float(self.seconds), "bound": self.bound}


@dataclass(frozen=True)
class Speculative:
    alpha: Fraction
    k: int
    modules: int
    batch: int
    plain: Step
    verify: Step
    draft: Step
    draft_model: str | None = None  # a separate draft model's name and size; None: the MTP modules

    @property
    def expected_tokens(self) -> Fraction:
        return expected_tokens(self.alpha, self.k)

    @property
    def iteration_seconds(self) -> Fraction:
        return self.verify.seconds + self.k * self.draft.seconds

    @property
    def speedup(self) -> Fraction:
        return self.expected_tokens * self.plain.seconds / self.iteration_seconds

    def to_json(self) -> dict:
        return {"draft": self.draft_model or "mtp", "acceptance": _exact(self.alpha), "draft_tokens": self.k,
                "mtp_modules": self.modules, "modules_reused": self.draft_model is None and self.k > self.modules,
                "expected_tokens_per_target_step": _exact(self.expected_tokens),
                "plain_step": self.plain.to_json(), "verify_step": self.verify.to_json(), "draft_step": self.draft.to_json(),
                "iteration_seconds": _exact(self.iteration_seconds),
                "speedup_bound": _exact(self.speedup), "speedup_bound_float": float(self.speedup),
                "tokens_per_second": float(self.batch * self.expected_tokens / self.iteration_seconds),
                "convention": f"per iteration: k {'draft-model' if self.draft_model else 'MTP'} draft steps, then one "
                              "target step verifying k + 1 tokens (weights read once); each at the run's average decode "
                              "step, max(FLOPs / peak, bytes / bandwidth)"}

    def render(self) -> str:
        reuse = f", the {self.modules} module(s) reused" if self.draft_model is None and self.k > self.modules else ""
        drafter = f"draft model {self.draft_model}" if self.draft_model else "MTP draft"
        return "\n".join([
            f"speculative decoding, {drafter} (k = {self.k}{reuse}, acceptance {self.alpha})",
            f"  tokens per target step  {self.expected_tokens} = {float(self.expected_tokens):,.4g}",
            f"  plain step   {_ms(self.plain.seconds)}   {self.plain.bound}-bound",
            f"  verify step  {_ms(self.verify.seconds)}   {self.verify.bound}-bound ({self.k + 1} tokens a sequence)",
            f"  draft step   {_ms(self.draft.seconds)}   {self.draft.bound}-bound "
            f"({'the draft model' if self.draft_model else 'the MTP module and the head'})",
            f"  speed-up bound {float(self.speedup):,.3f}x; "
            f"{float(self.batch * self.expected_tokens / self.iteration_seconds):,.1f} tokens/s"])


def speculative(binding, k: int, alpha: Fraction, infer_args: dict) -> Speculative:
    """The bounds for ``binding``'s size, the run given by ``infer_args`` (infer's keyword arguments)."""
    from archcalc.backends.infer import infer
    from archcalc.ir.mtp import with_mtp
    from archcalc.spec.bind import bind

    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise UsageError(f"archcalc infer: --mtp-draft {k!r}: expected a whole number of draft tokens of at least 1")
    spec = binding.spec
    if spec.model.mtp is None:
        raise UsageError(f"archcalc infer: --mtp-draft: spec {spec.name!r} has no multi-token prediction modules (no model.mtp section)")
    if infer_args["new_tokens"] < 2:
        raise UsageError("archcalc infer: --mtp-draft: expected --new-tokens of at least 2 (speculation speeds up the decode steps)")
    target = bind(with_mtp(spec, "off"), binding.size, binding.overrides)
    drafting = bind(with_mtp(spec, "shared"), binding.size, binding.overrides)
    modules = _modules(drafting)
    if modules < 1:
        raise UsageError(f"archcalc infer: --mtp-draft: {spec.name} {binding.size} has no MTP module (modules = 0)")
    r0, r1 = infer(target, **infer_args), infer(drafting, **infer_args)
    steps = r0.steps
    head = r0.weights.by_role.get("lm_head", Fraction(0)) or (r0.weights.embeddings if r0.weights.tied_head else 0)
    draft_f = Fraction(r1.decode.flops - r0.decode.flops, steps)
    draft_b = (r1.decode.bytes - r0.decode.bytes) / steps + head  # the shared head: re-read by every draft step
    plain, verify = _plain_and_verify(r0, k)
    return Speculative(alpha, k, modules, r0.batch, plain, verify, _step(draft_f, draft_b, r0.peak, r0.bandwidth, r0.tp))


def _plain_and_verify(r0, k: int) -> tuple[Step, Step]:
    """The target's average decode step, and its step verifying k + 1 tokens a sequence: the same reads once (the
    weights for B·(k+1) tokens), k + 1 tokens' FLOPs, KV writes and activations."""
    steps = r0.steps
    plain_f, plain_b = Fraction(r0.decode.flops, steps), r0.decode.bytes / steps
    verify_b = (plain_b - r0.weights.read(r0.batch) + r0.weights.read(r0.batch * (k + 1)) + k * r0.kv_written
                + k * r0.decode_activations / steps)
    return (_step(plain_f, plain_b, r0.peak, r0.bandwidth, r0.tp),
            _step((k + 1) * plain_f, verify_b, r0.peak, r0.bandwidth, r0.tp))


def with_draft_model(binding, draft, k: int, alpha: Fraction, infer_args: dict) -> Speculative:
    """The bounds with a separate, smaller ``draft`` model (a binding of another spec, same vocabulary) proposing
    ``k`` tokens a sequence by its own decode steps (on the same GPUs, its KV cache beside the target's), the target
    verifying them in one step."""
    from archcalc.backends.infer import infer

    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise UsageError(f"--draft-tokens {k!r}: expected a whole number of draft tokens of at least 1")
    if infer_args["new_tokens"] < 2:
        raise UsageError("speculative decoding speeds up decode steps: expected --output of at least 2")
    r0, rd = infer(binding, **infer_args), infer(draft, **infer_args)
    plain, verify = _plain_and_verify(r0, k)
    draft_step = _step(Fraction(rd.decode.flops, r0.steps), rd.decode.bytes / r0.steps, r0.peak, r0.bandwidth, r0.tp)
    return Speculative(alpha, k, 0, r0.batch, plain, verify, draft_step, f"{draft.spec.name} {draft.size}")


def _modules(binding) -> int:
    from archcalc.ir import lower

    node = lower(binding).root.find("mtp")
    return int(node.repeat.xreplace(binding.numeric())) if node is not None else 0


def _step(flops: Fraction, bytes_: Fraction, peak: int, bandwidth: int, tp: int) -> Step:
    compute, memory = Fraction(flops) / peak / tp, Fraction(bytes_) / bandwidth / tp
    return Step(Fraction(flops), Fraction(bytes_), max(compute, memory), "compute" if compute >= memory else "memory")


def _exact(value) -> int | str:
    value = Fraction(value)
    return value.numerator if value.denominator == 1 else f"{value.numerator}/{value.denominator}"


def _ms(seconds: Fraction) -> str:
    return f"{float(seconds) * 1e3:,.4g} ms"
