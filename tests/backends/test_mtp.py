"""Multi-token prediction modules (``model.mtp``): counted only with the switch (transformers' models, the oracle, leave
them out), then as a role of their own; their FLOPs, training state and KV cache with them; DeepSeek-V3's checkpoint
total from the module's tensor shapes."""

from __future__ import annotations

from archcalc.backends.count import count
from archcalc.backends.flops import flops
from archcalc.backends.memory import memory
from archcalc.ir.mtp import with_mtp
from archcalc.spec import load_spec
from archcalc.spec.bind import bind, parse_overrides

MTP_SPECS = ("deepseek_v3", "deepseek_v32", "glm4_moe", "glm_moe_dsa", "glm4_moe_lite")


def _bound(name: str, include: str, size: str | None = None, **values: int):
    spec = load_spec(name)
    if include != "off":
        spec = with_mtp(spec, include)
    overrides = parse_overrides(spec, [f"{k}={v}" for k, v in values.items()])
    return bind(spec, size or next(iter(spec.sizes)), overrides)


def test_off_by_default_and_no_role_without_the_switch():
    for name in MTP_SPECS:
        plain, off = count(_bound(name, "off")), count(bind(load_spec(name), next(iter(load_spec(name).sizes))))
        assert plain.total == off.total and "mtp" not in off.by_role
        assert not any(path.startswith("mtp.") for path in off.by_path)
        shared = count(_bound(name, "shared"))
        assert shared.total > off.total and shared.by_role["mtp"] == shared.total - off.total


def _deepseek_v3_module(v: dict) -> int:
    """One DeepSeek-V3 MTP module from its tensors' shapes (the checkpoint's model.layers.61), embedding and head
    shared: enorm, hnorm, shared_head.norm (d each), eh_proj (d x 2d), and one MoE block."""
    d, H = v["d"], v["H"]
    attention = (d * v["q_rank"] + v["q_rank"] + v["q_rank"] * H * (v["d_head"] + v["d_rope"])  # q_a, its norm, q_b
                 + d * (v["kv_rank"] + v["d_rope"]) + v["kv_rank"] + v["kv_rank"] * H * (v["d_head"] + v["d_v"])  # kv
                 + H * v["d_v"] * d)  # o_proj
    moe = v["E"] * d + v["E"] * 3 * d * v["d_expert"] + 3 * d * v["E_shared"] * v["d_expert"]  # gate, experts, shared
    block = 2 * d + attention + moe  # input_layernorm, post_attention_layernorm
    return 3 * d + 2 * d * d + block


def test_deepseek_v3_checkpoint_total_from_the_module_shapes():
    off = count(_bound("deepseek_v3", "off", "671b"))
    v = {str(k): int(x) for k, x in off.binding.numeric().items()}
    module = _deepseek_v3_module(v)
    shared, stored = count(_bound("deepseek_v3", "shared", "671b")), count(_bound("deepseek_v3", "stored", "671b"))
    assert shared.total == off.total + module and shared.by_role["mtp"] == module
    copies = 2 * v["V"] * v["d"]  # the checkpoint's model.layers.61.embed_tokens and shared_head.head
    assert stored.total == off.total + module + copies
    # The checkpoint (deepseek-ai/DeepSeek-V3, Hub API safetensors metadata) holds 3,918,786,560 BF16 and
    # 680,571,043,840 FP8 (E4M3) parameters (its 41,555,600 F32 ones are the FP8 block scales and the routers'
    # correction-bias buffers): 684,489,830,400 weights, the "685B" of the model card with the F32 ones
    assert stored.total == 3_918_786_560 + 680_571_043_840
    # the BF16 ones are exactly those the FP8 recipe leaves unquantized: embeddings, heads, norms, routers, eh_proj
    kept = ("norm.weight", "embed.token.weight", "head.weight", "router.weight", "eh_proj.weight", "embed.weight")
    assert sum(n for path, n in stored.by_path.items() if path.endswith(kept)) == 3_918_786_560
    assert round(off.total, -9) == 671 * 10**9  # the paper's 671B leaves the module out


def test_modules_and_layers_multiply_and_zero_modules_count_nothing():
    off = count(_bound("deepseek_v3", "off", "671b")).total
    one = count(_bound("deepseek_v3", "shared", "671b")).total - off
    assert count(_bound("deepseek_v3", "shared", "671b", N_mtp=3)).total - off == 3 * one
    assert count(_bound("deepseek_v3", "shared", "671b", N_mtp=0)).total == off


def test_tied_head_is_shared_and_stored_copies_follow_it():
    off = count(_bound("glm4_moe", "off", "4.7", tie_embeddings="true"))
    shared = count(_bound("glm4_moe", "shared", "4.7", tie_embeddings="true"))
    stored = count(_bound("glm4_moe", "stored", "4.7", tie_embeddings="true"))
    v = {str(k): int(x) for k, x in off.binding.numeric().items()}
    assert stored.total - shared.total == 2 * v["V"] * v["d"]
    assert "lm_head" not in shared.by_role  # the model's head is still tied


def test_flops_add_one_block_the_projection_and_the_head():
    """The module's forward = one more MoE block (the model with L + 1 layers less the model) + eh_proj (2d -> d) +
    the shared head once more, all over the same tokens."""
    S, B = 512, 2
    base = flops(_bound("deepseek_v3", "off", "671b"), S, B)
    more = flops(_bound("deepseek_v3", "off", "671b", L=62), S, B)
    mtp = flops(_bound("deepseek_v3", "shared", "671b"), S, B)
    v = {str(k): int(x) for k, x in base.binding.numeric().items()}
    extra = (more.forward_matmul - base.forward_matmul) + 2 * B * S * 2 * v["d"] * v["d"] + 2 * B * S * v["V"] * v["d"]
    assert mtp.forward_matmul - base.forward_matmul == extra == mtp.by_role["mtp"]
    causal = more.forward_matmul_causal - base.forward_matmul_causal + extra - (more.forward_matmul - base.forward_matmul)
    assert mtp.forward_matmul_causal - base.forward_matmul_causal == causal
    assert mtp.train_step_matmul == 3 * mtp.forward_matmul


def test_memory_holds_the_module_weights_state_and_cache():
    S, B = 1024, 1
    off, on = _bound("deepseek_v3", "off", "671b"), _bound("deepseek_v3", "shared", "671b")
    base, mtp = memory(off, S, B).to_json(), memory(on, S, B).to_json()
    more = memory(_bound("deepseek_v3", "off", "671b", L=62), S, B).to_json()
    total = count(on).total
    assert mtp["weights_bytes"] == 2 * total and mtp["training"]["states_bytes"] == 16 * total
    assert mtp["kv_cache_bytes"] - base["kv_cache_bytes"] == more["kv_cache_bytes"] - base["kv_cache_bytes"] > 0
    assert mtp["training"]["activations_bytes"] > base["training"]["activations_bytes"]


def test_a_config_with_every_layer_dense_repeats_the_dense_block(cli):
    """A config whose layers are all dense (the MoE stack left out) gets a module of the dense kind: one more of its
    layers, eh_proj and the three norms."""
    from tests.helpers import DATA

    config = str(DATA / "hf" / "trl-tiny-deepseekv3forcausallm.json")
    plain, with_mtp = (cli("count", "--hf", config, *flag, "--json").json()["results"][0] for flag in ((), ("--with-mtp",)))
    v = plain["values"]
    one_more = cli("count", "--hf", config, "--set", f"L_dense={v['L_dense'] + 1}", "--json").json()["results"][0]
    assert set(plain["by_path"]) == {p for p in plain["by_path"] if not p.startswith("blocks.")}  # no MoE stack
    assert with_mtp["by_role"]["mtp"] == one_more["total"] - plain["total"] + 2 * v["d"] * v["d"] + 3 * v["d"]


def test_mtp_needs_a_decoder(tmp_path, cli):
    from archcalc.spec.library import library_dir

    text = (library_dir() / "bert.yaml").read_text()
    path = tmp_path / "bert_mtp.yaml"
    path.write_text(text.replace("\nmodel:\n", "\nmodel:\n  mtp: {modules: 1, norm: layernorm}\n", 1))
    r = cli("count", str(path))
    assert r.status == 2 and "needs a decoder" in r.err and f"{path}:" in r.err


def test_inference_reads_the_shared_table_by_rows_and_the_stored_head_whole():
    """With the module counted, the model's head stays untied (the module's shared head is not a tied head), and the
    stored copies are read as the model's own are: the embedding copy by the rows of the tokens, the head whole."""
    from archcalc.backends.infer import infer

    run = {"hardware_name": "h200", "batch": 1, "prompt": 16, "new_tokens": 4}
    shared = infer(_bound("deepseek_v3", "shared", "671b"), **run).weights
    stored = infer(_bound("deepseek_v3", "stored", "671b"), **run).weights
    v = {str(k): int(x) for k, x in _bound("deepseek_v3", "off", "671b").numeric().items()}
    assert not shared.tied_head and not stored.tied_head
    for tokens in (1, 5):
        assert stored.read(tokens) - shared.read(tokens) == 2 * (v["V"] * v["d"] + tokens * v["d"])  # bf16


def test_generate_builds_the_module_and_refuses_its_stored_copies_in_one_line(tmp_path, cli):
    """A spec that counts its MTP modules (include: shared) gets them generated; one that also counts the checkpoint's
    own copies of the embedding and head (include: stored) is refused in one located line, nothing written."""
    from archcalc.spec.library import library_dir

    text = (library_dir() / "deepseek_v3.yaml").read_text()
    for include, status in (("shared", 0), ("stored", 2)):
        path = tmp_path / f"with_mtp_{include}.yaml"
        path.write_text(text.replace("mtp: {modules: N_mtp,", f"mtp: {{include: {include}, modules: N_mtp,", 1))
        assert f"include: {include}" in path.read_text()
        out = tmp_path / f"m_{include}.py"
        r = cli("generate", str(path), "-o", str(out))
        assert r.status == status, r.err
        if status:
            assert "multi-token prediction modules" in r.err and f"{path}:" in r.err and r.err.count("\n") == 1
            assert not out.exists()
        else:
            assert "class MTP(nn.Module)" in out.read_text()
