"""archcalc.cleanup: what a run undoes, torch's empty compile-cache folder among it."""

from __future__ import annotations

import getpass
import tempfile

import pytest

from archcalc import cleanup


@pytest.fixture
def tmp_as_tempdir(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR", raising=False)
    return tmp_path / f"torchinductor_{getpass.getuser()}"


def test_an_empty_cache_folder_made_during_the_run_is_removed(tmp_as_tempdir):
    tidy = cleanup.torch_cache_tidier()
    tmp_as_tempdir.mkdir()  # what importing torch._dynamo does
    tidy()
    assert not tmp_as_tempdir.exists()


def test_a_filled_cache_or_one_that_was_there_stays(tmp_as_tempdir):
    tidy = cleanup.torch_cache_tidier()
    tmp_as_tempdir.mkdir()
    (tmp_as_tempdir / "fxgraph").mkdir()  # torch compiled something: its cache
    tidy()
    assert (tmp_as_tempdir / "fxgraph").is_dir()
    (tmp_as_tempdir / "fxgraph").rmdir()
    tidy = cleanup.torch_cache_tidier()  # the empty folder was there before this run
    tidy()
    assert tmp_as_tempdir.is_dir()


def test_a_cache_folder_the_user_named_is_left_alone(tmp_as_tempdir, monkeypatch, tmp_path):
    named = tmp_path / "mine"
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(named))
    tidy = cleanup.torch_cache_tidier()
    named.mkdir()
    tmp_as_tempdir.mkdir()
    tidy()
    assert named.is_dir() and tmp_as_tempdir.is_dir()
