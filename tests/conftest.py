"""The suite's settings, in one place: the hypothesis profile (HYPOTHESIS_PROFILE=dev, the default, or ci, which
.ci/run sets), which tests are ``slow`` (decided here by rule, never by hand in a test file), and the ``cli``
fixture that runs archcalc in-process and captures what it prints.

Tiers: ``python -m pytest`` runs everything (the README's command, what CI runs); ``python -m pytest -m "not slow"``
is the edit-test loop."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from archcalc.cli import main
from tests.helpers import HYPOTHESIS_PROFILE, LARGE_HYPOTHESIS

ROOT = Path(__file__).resolve().parent.parent

# What makes a test slow. A test is slow when its module is one of these (every test in it crosses a process or
# browser boundary), when it is one of SLOW_TESTS, when it asks for one of these fixtures, when it is a hypothesis
# test that draws LARGE_HYPOTHESIS examples or more under the ci profile, or when it is a case of a parametrized
# test other than its FAST_CASES cases spread evenly over the sweep (the first and the last among them): the fast
# tier runs every test function, on a sample of its cases; the full run, every case.
FAST_CASES = 4
SLOW_MODULES = {
    "tests/site/test_browser.py": "drives Chromium",
    "tests/site/test_calculator_limits.py": "drives Chromium",
    "tests/test_packaging.py": "builds and installs a wheel",
    "tests/codegen/test_distributed.py": "starts process groups with torchrun",
}
SLOW_TESTS = {
    "tests/site/test_docs_cmd.py::test_the_real_site_goes_under_o_and_nothing_else_changes": "renders the whole site three times",
}
SLOW_FIXTURES = {
    "built_site": "builds the site with mkdocs",
    "process": "runs archcalc in a child process",
}


def pytest_configure(config):
    try:
        from hypothesis import HealthCheck, settings
    except ImportError:  # hypothesis is in the dev extra; without it the property tests skip themselves
        return
    # examples per test: tests/helpers.examples() scales each test's own count by the profile
    settings.register_profile("ci", deadline=None, max_examples=100, suppress_health_check=[HealthCheck.too_slow])
    settings.register_profile("dev", deadline=None, max_examples=25, suppress_health_check=[HealthCheck.too_slow])
    if HYPOTHESIS_PROFILE not in ("ci", "dev"):
        raise pytest.UsageError(f"HYPOTHESIS_PROFILE must be dev or ci, got {HYPOTHESIS_PROFILE!r}")
    settings.load_profile(HYPOTHESIS_PROFILE)


def slow_reason(item) -> str | None:
    """Why ``item`` is slow, or None: by its module, its fixtures, or its hypothesis examples."""
    module = Path(str(item.fspath)).resolve()
    relative = module.relative_to(ROOT).as_posix() if module.is_relative_to(ROOT) else module.as_posix()
    if relative in SLOW_MODULES:
        return SLOW_MODULES[relative]
    if f"{relative}::{getattr(item, 'originalname', item.name)}" in SLOW_TESTS:
        return SLOW_TESTS[f"{relative}::{item.originalname}"]
    for fixture in getattr(item, "fixturenames", ()):
        if fixture in SLOW_FIXTURES:
            return SLOW_FIXTURES[fixture]
    test = getattr(item, "obj", None)
    if getattr(test, "is_hypothesis_test", False):
        wanted = getattr(test, "_hypothesis_internal_use_settings", None)
        if wanted is not None and getattr(test, "ci_examples", wanted.max_examples) >= LARGE_HYPOTHESIS:
            return "draws many hypothesis examples"
    return None


def sampled_cases(items) -> set[str]:
    """The node ids of the cases the fast tier runs of each parametrized test: FAST_CASES of them, spread evenly over
    the cases in collection order (the same on every worker); every case of a test with no more than that."""
    sweeps: dict[tuple[str, str], list[str]] = {}
    for item in items:
        if getattr(item, "callspec", None) is not None:
            sweeps.setdefault((str(item.fspath), item.originalname), []).append(item.nodeid)
    kept = set()
    for ids in sweeps.values():
        n = len(ids)
        kept |= set(ids) if n <= FAST_CASES else {ids[round(i * (n - 1) / (FAST_CASES - 1))] for i in range(FAST_CASES)}
    return kept


def pytest_collection_modifyitems(config, items):
    sampled = sampled_cases(items)
    for item in items:
        reason = slow_reason(item)
        if reason is None and getattr(item, "callspec", None) is not None and item.nodeid not in sampled:
            reason = f"a case of a sweep beyond the {FAST_CASES} the fast tier samples"
        if reason is not None and "slow" not in item.keywords:
            item.add_marker(pytest.mark.slow(reason=reason))


@dataclass
class Run:
    status: int
    out: str
    err: str

    def json(self) -> dict:
        return json.loads(self.out)


@pytest.fixture
def cli(capsys):
    """``cli("count", "gpt2", "--json")`` runs archcalc in-process and returns status, stdout, stderr."""

    def run(*argv: str) -> Run:
        status = main(list(argv))
        captured = capsys.readouterr()
        return Run(status, captured.out, captured.err)

    return run


class Processes:
    """Child Python processes, for the tests whose subject is the process boundary: exit status, signals, stdout
    and stderr of ``python -m archcalc``, a fresh interpreter. Tests that ask for this fixture are ``slow``; every
    other test runs archcalc in-process (the ``cli`` fixture)."""

    def run(self, args: list[str], **kwargs) -> subprocess.CompletedProcess:
        """``python ARGS`` to its end (10 minutes at most), its output captured as text unless told otherwise."""
        kwargs.setdefault("capture_output", True)
        kwargs.setdefault("text", True)
        kwargs.setdefault("timeout", 600)
        return subprocess.run([sys.executable, *args], **kwargs)

    def popen(self, args: list[str], **kwargs) -> subprocess.Popen:
        """``python ARGS`` started, for a test that signals it or reads it while it runs."""
        return subprocess.Popen([sys.executable, *args], **kwargs)


@pytest.fixture
def process() -> Processes:
    return Processes()
