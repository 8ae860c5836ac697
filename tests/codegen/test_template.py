"""The template mechanism: regions kept or dropped by flags, placeholders replaced as whole tokens, arguments
dropped from calls, brackets joined back onto one line where they fit (as ruff format would write them)."""

from __future__ import annotations

import pytest

from archcalc.codegen.template import joined, regions, substitute

TEMPLATE = '''def forward(
    self,
    x: torch.Tensor,
    # region: rope
    rope: tuple[torch.Tensor, torch.Tensor],
    # endregion
    # region: cache
    cache: KVCache | None = None,
    # endregion
) -> torch.Tensor:
    # region: !cache
    y = x  # no cache
    # endregion
    # region: cache
    # region: rope
    y = x + rope[0]
    # endregion
    # endregion
    return y'''


def test_regions_keep_and_drop_lines_and_the_markers_never_remain():
    text = regions(TEMPLATE, {"rope": False, "cache": True})
    assert "region" not in text and "rope" not in text.replace("# ", "") and "cache: KVCache" in text
    assert "y = x  # no cache" not in text
    nested = regions(TEMPLATE, {"rope": True, "cache": False})
    assert "y = x + rope[0]" not in nested and "y = x  # no cache" in nested  # inside a dropped region: dropped


def test_a_misspelt_region_is_an_error():
    with pytest.raises(KeyError):
        regions(TEMPLATE, {"rope": True})


def test_a_bracket_that_held_regions_goes_back_on_one_line_where_it_fits():
    text = joined(regions(TEMPLATE, {"rope": False, "cache": False}))
    assert text.startswith("def forward(self, x: torch.Tensor) -> torch.Tensor:\n")
    long = joined(regions(TEMPLATE, {"rope": True, "cache": True}))  # 104 characters on one line: stays split
    assert long.startswith("def forward(\n    self,\n")


def test_placeholders_are_whole_tokens_never_substrings():
    text = "k = self.kv_heads * cfg.heads + cfg.kv_heads  # cfg.heads\ns = 'cfg.heads'\n"
    out = substitute(text, {"cfg.heads": "cfg.local_heads", "self.kv_heads": "self.heads"})
    assert out == "k = self.heads * cfg.local_heads + cfg.kv_heads  # cfg.heads\ns = 'cfg.heads'\n"


def test_a_string_placeholder_is_replaced_by_source():
    assert substitute('    """DOC"""\n', {"DOC": '"""The doc."""'}) == '    """The doc."""\n'


def test_dropped_arguments_leave_the_call_with_its_commas_right():
    text = "y = f(q, k, v, is_causal=T > 1, scale=self.scale, enable_gqa=True)\nz = g(x, bias, cache)\n"
    out = substitute(text, {}, {"scale=", "enable_gqa=", "bias"})
    assert out == "y = f(q, k, v, is_causal=T > 1)\nz = g(x, cache)\n"
    assert substitute("nn.Linear(a, b, bias=False)\n", {}, {"bias"}) == "nn.Linear(a, b, bias=False)\n"


def test_a_call_split_only_for_its_length_is_joined_once_it_fits():
    text = "        y = F.scaled_dot_product_attention(\n            q, k, v, is_causal=T > 1\n        )  # (B, H, T, d)"
    assert joined(text) == "        y = F.scaled_dot_product_attention(q, k, v, is_causal=T > 1)  # (B, H, T, d)"
