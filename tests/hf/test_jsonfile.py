"""archcalc.hf.jsonfile: JSON's NaN/Infinity in a config.json, accepted exactly where transformers' config classes
have them as defaults (issue 28), refused elsewhere in one located line."""

from __future__ import annotations

import json
import math
import re

import pytest

from archcalc.errors import SpecError
from archcalc.hf.jsonfile import INFINITY_KEYS, NAN_KEYS, parse_text

LOCATED = re.compile(r"^(?P<file>.+\.json):(?P<line>\d+):(?P<col>\d+): .+$")

# A Mamba2 config as transformers saves it (json.dumps writes float('inf') as Infinity)
MAMBA2 = """{
  "architectures": ["Mamba2ForCausalLM"],
  "hidden_size": 2560,
  "model_type": "mamba2",
  "num_heads": 80,
  "num_hidden_layers": 64,
  "state_size": 128,
  "time_step_limit": [
    0.0,
    Infinity
  ],
  "vocab_size": 50280
}"""


def test_infinity_is_accepted_at_time_step_limit_as_a_float_in_its_list():
    cf = parse_text(MAMBA2, "c.json")
    limit = cf.data["time_step_limit"]
    assert isinstance(limit, list) and limit[0] == 0.0
    assert isinstance(limit[1], float) and math.isinf(limit[1]) and limit[1] > 0
    assert str(cf.where(("time_step_limit", 1), value=True)) == "c.json:10:5"
    assert json.loads(json.dumps(cf.data)) == json.loads(MAMBA2)  # what transformers writes, read back the same


def test_negative_infinity_and_a_bare_infinity_are_accepted_at_time_step_limit():
    cf = parse_text('{"model_type": "mamba2", "time_step_limit": [-Infinity, Infinity]}')
    assert cf.data["time_step_limit"] == [-math.inf, math.inf]
    assert parse_text('{"time_step_limit": Infinity}').data["time_step_limit"] == math.inf


@pytest.mark.parametrize("text,where,words", [
    ('{\n  "model_type": "llama",\n  "hidden_size": Infinity\n}', "c.json:3:3", ["hidden_size: Infinity", "time_step_limit"]),
    ('{"model_type": "llama", "rope_theta": NaN}', "c.json:1:25", ["rope_theta: NaN", "expected a finite number"]),
    ('{"model_type": "llama", "rms_norm_eps": -Infinity}', "c.json:1:25", ["rms_norm_eps: -Infinity"]),
    # a list item is located at itself, named by its index
    ('{"model_type": "qwen3_moe", "mlp_only_layers": [1, Infinity]}', "c.json:1:52", ["mlp_only_layers[1]: Infinity"]),
    # NaN: no transformers config class has it as a default, not even at time_step_limit
    ('{"model_type": "mamba2", "time_step_limit": [0.0, NaN]}', "c.json:1:51",
     ["time_step_limit[1]: NaN", "expected a finite number, Infinity or -Infinity"]),
    # a key that merely ends like an allowed one, or holds one inside an object, is another key
    ('{"time_step_limit_x": [0.0, Infinity]}', "c.json:1:29", ["time_step_limit_x[1]: Infinity"]),
    ('{"time_step_limit": {"max": Infinity}}', "c.json:1:22", ["time_step_limit.max: Infinity"]),
])
def test_non_finite_numbers_elsewhere_are_refused_at_their_key(text, where, words):
    with pytest.raises(SpecError) as e:
        parse_text(text, "c.json")
    message = str(e.value)
    assert message.startswith(where + ": ") and "\n" not in message, message
    assert "malformed JSON" not in message, message
    for word in words:
        assert word in message, message


def test_nested_text_config():
    cf = parse_text('{"model_type": "x", "text_config": {"model_type": "mamba2", "time_step_limit": [0.0, Infinity]}}')
    assert math.isinf(cf.data["text_config"]["time_step_limit"][1])
    with pytest.raises(SpecError) as e:
        parse_text('{"model_type": "llava", "text_config": {"model_type": "llama",\n   "rms_norm_eps": -Infinity}}', "c.json")
    assert str(e.value).startswith("c.json:2:4: text_config.rms_norm_eps: -Infinity is not a finite number"), str(e.value)


def test_the_words_inside_strings_are_only_strings():
    cf = parse_text('{"model_type": "llama", "hidden_act": "Infinity", "NaN": "-Infinity"}')
    assert cf.data["hidden_act"] == "Infinity" and cf.data["NaN"] == "-Infinity"


def test_the_first_problem_in_the_text_is_reported():
    with pytest.raises(SpecError, match=r"^c\.json:1:10: duplicate key 'a'"):
        parse_text('{"a": 1, "a": 2, "b": NaN}', "c.json")
    with pytest.raises(SpecError, match=r"^c\.json:1:2: a: NaN"):
        parse_text('{"a": NaN, "b": 1, "b": 2}', "c.json")


def test_other_malformed_numbers_stay_refused():
    with pytest.raises(SpecError, match=r"^c\.json:1:1: malformed JSON: .*digits"):
        parse_text('{"time_step_limit": [0.0, 1' + "0" * 5000 + "]}", "c.json")
    with pytest.raises(SpecError, match=r"^c\.json:1:27: malformed JSON"):
        parse_text('{"time_step_limit": [0.0, inf]}', "c.json")  # JSON spells it Infinity


def test_cli_counts_a_saved_mamba2_config_with_its_infinity(cli, tmp_path):
    """Not malformed JSON: the Infinity transformers writes in time_step_limit is read, and the model counted."""
    path = tmp_path / "config.json"
    path.write_text(MAMBA2)
    run = cli("count", "--hf", str(path), "--json")
    assert run.status == 0 and run.err == "", run.err
    assert run.json()["results"][0]["total"] == 3_125_470_720  # transformers' Mamba2ForCausalLM on the meta device


@pytest.mark.parametrize("command", ["count", "import-hf"])
@pytest.mark.parametrize("text,line,col,key", [
    ('{\n  "model_type": "llama",\n  "hidden_size": Infinity\n}', 3, 3, "hidden_size"),
    ('{"model_type": "llama", "rope_theta": NaN}', 1, 25, "rope_theta"),
])
def test_cli_refuses_a_misplaced_non_finite_number_in_one_located_line(cli, tmp_path, command, text, line, col, key):
    path = tmp_path / "config.json"
    path.write_text(text)
    run = cli(command, str(path)) if command == "import-hf" else cli(command, "--hf", str(path), "--json")
    message = run.err.strip()
    assert run.status == 2 and run.out == "" and "\n" not in message and "Traceback" not in message, message
    m = LOCATED.match(message)
    assert m and (m["file"], int(m["line"]), int(m["col"])) == (str(path), line, col), message
    assert f": {key}: " in message and "finite number" in message, message


def _measure_non_finite_defaults(transformers) -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    """Keys under which some transformers config class, built with its defaults, has an infinity / a NaN in
    ``to_dict()`` (any depth; a list item counts as under its key), each with the model types that have it."""
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    inf: dict[str, set[str]] = {}
    nan: dict[str, set[str]] = {}

    def walk(node, key, model_type):
        if isinstance(node, float) and not math.isfinite(node):
            (nan if math.isnan(node) else inf).setdefault(key, set()).add(model_type)
        elif isinstance(node, dict):
            for k, v in node.items():
                walk(v, k, model_type)
        elif isinstance(node, (list, tuple)):
            for v in node:
                walk(v, key, model_type)

    built = 0
    for model_type in list(CONFIG_MAPPING.keys()):
        try:
            data = CONFIG_MAPPING[model_type]().to_dict()
        except Exception:  # a few classes cannot be built from their defaults alone
            continue
        built += 1
        walk(data, None, model_type)
    assert built > 100  # the measurement ran over the config classes, not over nothing
    return inf, nan


def test_the_tables_are_what_transformers_config_classes_have_today():
    transformers = pytest.importorskip("transformers")
    transformers.logging.set_verbosity_error()
    inf, nan = _measure_non_finite_defaults(transformers)
    assert "mamba2" in inf.get("time_step_limit", set()), inf
    assert set(inf) == INFINITY_KEYS, f"update archcalc.hf.jsonfile.INFINITY_KEYS: transformers has {inf}"
    assert set(nan) == NAN_KEYS, f"update archcalc.hf.jsonfile.NAN_KEYS: transformers has {nan}"
