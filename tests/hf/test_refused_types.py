"""Model types refused on purpose (archcalc/hf/refused.py): a config of one, as transformers saves it, is answered with
one located line naming what is not modelled and exit 2, by every command that reads a config; never a count."""

from __future__ import annotations

import json

import pytest

from archcalc.hf.refused import REFUSED

transformers = pytest.importorskip("transformers")


@pytest.mark.parametrize("model_type", sorted(REFUSED))
@pytest.mark.parametrize("command", [["import-hf"], ["count", "--hf"], ["flops", "--seq-len", "8", "--hf"]])
def test_a_refused_type_is_one_located_line(cli, tmp_path, model_type, command):
    config = transformers.AutoConfig.for_model(model_type)  # the class defaults, every key transformers writes
    path = tmp_path / "config.json"
    path.write_text(config.to_json_string(use_diff=False))
    assert transformers.AutoConfig.from_pretrained(tmp_path).model_type == model_type  # transformers reads it back
    run = cli(*command, str(path))
    assert run.status == 2 and run.out == ""
    line = run.err.strip()
    assert "\n" not in line and "Traceback" not in line
    line_no = 1 + path.read_text()[: path.read_text().index('"model_type"')].count("\n")  # where the key is
    assert line.startswith(f"{path}:{line_no}:") and f"model_type: {model_type!r}: " in line
    assert line.endswith(REFUSED[model_type])


def test_deepseek_v4_names_the_features_it_has():
    """Each feature the refusal names is one DeepSeek-V4's config really carries (so the line says why, not a guess)."""
    fields = json.loads(transformers.DeepseekV4Config().to_json_string(use_diff=False))
    why = REFUSED["deepseek_v4"]
    for key in ("hc_mult", "compress_rates", "o_groups", "mlp_layer_types"):
        assert f"({key}" in why and key in fields, key
    assert fields["scoring_func"] in why and "hash_moe" in fields["mlp_layer_types"]  # its first MoE layers hash-routed
