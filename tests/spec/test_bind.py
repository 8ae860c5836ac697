"""archcalc.spec.bind: one Binding a plain size, memoising what depends on it alone."""

from __future__ import annotations


def test_a_plain_size_binds_once_and_its_ir_and_count_are_built_once():
    """bind(spec, size) without overrides gives the same Binding, whose IR and count are memoised (a docs build asks
    for them many times a size); overrides give a fresh binding, whose count differs."""
    from archcalc.backends.count import count
    from archcalc.ir import lower
    from archcalc.spec import load_spec
    from archcalc.spec.bind import bind, parse_overrides

    spec = load_spec("gpt2")
    first = bind(spec, "small")
    assert bind(spec, "small") is first and bind(spec, "medium") is not first
    assert lower(first) is lower(first) and count(first) is count(first)
    wider = bind(spec, "small", parse_overrides(spec, ["d=1536"]))
    assert wider is not first and count(wider).total > count(first).total
