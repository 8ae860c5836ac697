"""The tests' shared helpers, one of each: a spec at a size with hyperparameters overridden (bound, lowered,
emitted, imported as a module), transformers' models built on the meta device (the counting oracle), a
generated file checked with ruff, and the command line the documentation site runs.

Nothing here imports torch or transformers until a helper that needs them is called.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from archcalc.ir import Lowered, lower
from archcalc.spec import Spec, load_spec
from archcalc.spec.bind import Binding, bind, parse_overrides
from archcalc.spec.transform import fuse_projections, separate_projections

DATA = Path(__file__).parent / "data"
HYPOTHESIS_PROFILE = os.environ.get("HYPOTHESIS_PROFILE", "dev")  # ci: every example (.ci/run sets it); dev: a quarter
LARGE_HYPOTHESIS = 100  # a property test drawing this many examples under ci is slow (tests/conftest.py)


def examples(n: int, **settings_kwargs):
    """``@examples(n)``: hypothesis settings that draw ``n`` examples under the ci profile and a quarter of them (at
    least 10) under dev, with no deadline; the ci count stays on the test, where tests/conftest.py reads it."""
    from hypothesis import settings

    def decorate(test):
        drawn = n if HYPOTHESIS_PROFILE == "ci" else max(10, n // 4)
        test = settings(max_examples=drawn, deadline=None, **settings_kwargs)(test)
        test.ci_examples = n
        return test

    return decorate
TINY = dict(V=97, T=32, L=2, d=32, H=4)  # a GPT-2 small enough to run anywhere


def codegen_spec(name: str) -> Spec:
    """A test spec of tests/data/codegen (``rotary``, ``moe``, ``latent``...)."""
    return load_spec(str(DATA / "codegen" / f"{name}.yaml"))


def bound(spec: str | Spec, size: str | None = None, **values) -> Binding:
    """``spec`` (a bundled name, a path or a loaded spec) at ``size`` with hyperparameters overridden as
    ``--set NAME=VALUE`` would (booleans as true/false)."""
    spec = load_spec(spec) if isinstance(spec, str) else spec
    return bind(spec, size, parse_overrides(spec, [f"{k}={str(v).lower()}" for k, v in values.items()]))


def lowered(spec: str | Spec, size: str | None = None, fused: bool = False, separate: bool = False, **values) -> Lowered:
    """The IR of :func:`bound`'s binding; ``fused`` / ``separate``: with fused or separate projections."""
    spec = load_spec(spec) if isinstance(spec, str) else spec
    spec = fuse_projections(spec) if fused else separate_projections(spec) if separate else spec
    return lower(bound(spec, size, **values))


def source(spec: str | Spec, size: str | None = None, fused: bool = False, **values) -> str:
    """The generated PyTorch source of :func:`lowered`'s IR (emitted once per process for a bundled spec's name)."""
    if isinstance(spec, str):
        return _bundled_source(spec, size, fused, tuple(sorted(values.items())))
    from archcalc.codegen.emit import emit

    return emit(lowered(spec, size, fused, **values), "test")


@functools.cache
def _bundled_source(spec: str, size: str | None, fused: bool, values: tuple) -> str:
    from archcalc.codegen.emit import emit

    return emit(lowered(spec, size, fused, **dict(values)), "test")


def module(spec: str | Spec, size: str | None = None, fused: bool = False, **values):
    """The generated module of :func:`source`, imported (it imports torch)."""
    return loaded(source(spec, size, fused, **values))


@functools.cache
def loaded(text: str):
    """``text`` (a generated source) imported as a module, once per process: tests build models from a module and
    never change the module itself."""
    from archcalc.codegen.load import load_source

    return load_source(text)


def meta_count(config, model_class: str | None = None) -> int:
    """The oracle: ``sum(p.numel())`` of the model transformers builds from ``config`` on the meta device (allocating
    nothing), as ``transformers.<model_class>`` or, by default, ``AutoModelForCausalLM``."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    transformers.logging.set_verbosity_error()
    with torch.device("meta"):
        if model_class is None:
            model = transformers.AutoModelForCausalLM.from_config(config)
        else:
            model = getattr(transformers, model_class)(config)
    return sum(p.numel() for p in model.parameters())


RUFF_RULES = ("--select", "E,F,W,B", "--ignore", "E501")  # pyflakes, pycodestyle, bugbear; long lines allowed


def cache_bytes(cache: list) -> tuple[int, int]:
    """The bytes a generated model's cache holds: (the attention layers' keys and values, the state mixers' conv
    windows and states); a layer of attention and a mixer side by side (a ParallelCache) counts both of its caches."""
    cache = [part for c in cache for part in ((c.kv, c.state) if hasattr(c, "kv") else (c,))]
    kv = sum(t.numel() * t.element_size() for c in cache if hasattr(c, "k") for t in (c.k, c.v))
    state = sum(t.numel() * t.element_size() for c in cache if hasattr(c, "ssm_state") for t in (c.conv_state, c.ssm_state))
    return kv, state


def text_model(data: dict) -> dict:
    """A multimodal wrapper config's text model, as archcalc imports it (its text_config, with the wrapper's head tying
    where the text_config says none: Qwen3.5's), else the config itself."""
    from archcalc.hf.registry import bundled_spec

    data = _typed(data)
    inner = data.get("text_config")
    if not isinstance(inner, dict) or bundled_spec(str(data.get("model_type"))) is not None \
            or bundled_spec(str(inner.get("model_type"))) is None:
        return data
    from archcalc.hf.build import WRAPPER_TIES

    if data.get("model_type") in WRAPPER_TIES:  # Mistral 3: the wrapper's flag (or its default) ties the head
        return {**inner, "tie_word_embeddings": data.get("tie_word_embeddings", WRAPPER_TIES[data["model_type"]])}
    return {"tie_word_embeddings": data["tie_word_embeddings"], **inner} if "tie_word_embeddings" in data else dict(inner)


def _typed(data: dict) -> dict:
    """A config that names no model_type (a remote-code config: LongCat-Flash-Chat's) with the type transformers' own
    registry gives its one class (LongcatFlashForCausalLM: longcat_flash), as archcalc reads it; else the config."""
    classes = data.get("architectures")
    if "model_type" in data or not (isinstance(classes, list) and len(classes) == 1):
        return data
    try:
        from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES
    except ImportError:  # without the test oracle: archcalc's own reading (the oracle tests skip themselves)
        from archcalc.hf.build import by_architecture

        family = by_architecture(classes[0])
        return {**data, "model_type": family.model_type} if family is not None else data
    types = [t for t, cls in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES.items() if cls == classes[0]]
    return {**data, "model_type": types[0]} if len(types) == 1 else data


def generate_keeping_cache(model, input_ids, max_new_tokens: int) -> list:
    """``model.generate(input_ids, max_new_tokens, temperature=0)`` of a generated module, and the one cache it made
    (a list: a KVCache, MixerCache or pair per layer), to measure what generation holds."""
    caches = []
    new_cache = model.new_cache
    model.new_cache = lambda *args: caches.append(new_cache(*args)) or caches[-1]
    model.generate(input_ids, max_new_tokens=max_new_tokens, temperature=0)
    (cache,) = caches
    return cache


def assert_ruff_clean(text: str, folder: Path, name: str = "model.py") -> None:
    """``text`` (a generated file) written to ``folder/name`` passes ``ruff check`` with :data:`RUFF_RULES` and no
    configuration of ours (``--isolated``)."""
    if shutil.which("ruff") is None and not Path(sys.executable).with_name("ruff").exists():
        pytest.skip("ruff not installed")
    path = folder / name
    path.write_text(text, encoding="utf-8")
    proc = subprocess.run([sys.executable, "-m", "ruff", "check", "--isolated", *RUFF_RULES, str(path)],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def site_program():
    """The command line that ``archcalc docs`` hands to the site (its parser, its main, the child for torch)."""
    from archcalc.cli import build_parser, main
    from archcalc.cli.docs_cmd import CHILD
    from archcalc.site.examples import Program

    return Program(build_parser, main, CHILD)


def pin_real_slots(model, binding: Binding) -> None:
    """Zero-compute experts (LongCat-Flash's): the router decides per token how many of its top_k slots land on real
    experts, while the FLOPs count each token's ``real_top_k`` (the spec's even share). Pin the routing to that
    assumption through the correction bias (a buffer a checkpoint sets): every token takes the first ``real_top_k``
    real experts and zero experts for its other slots, so FlopCounterMode counts what archcalc does. A no-op for a
    model without zero experts."""
    import torch

    moes = [m for m in model.modules() if hasattr(m, "router") and hasattr(m, "experts") and hasattr(m, "score_bias")
            and m.router.out_features > len(m.experts)]
    if not moes:
        return
    reals = {int(b.mlp.real_top_k.evaluate(binding.values)) for b in binding.spec.model.blocks or ()
             if b.mlp is not None and b.mlp.real_top_k is not None}
    assert len(reals) == 1, reals
    real = reals.pop()
    with torch.no_grad():
        for moe in moes:  # scores are shares in [0, 1]: +-10 decides the choice
            bias = torch.zeros_like(moe.score_bias)
            bias[:real], bias[real : len(moe.experts)] = 10.0, -10.0
            moe.score_bias.copy_(bias)
