"""A non-editable install (a built wheel) finds the bundled specs by name."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def test_wheel_install_finds_bundled_specs(tmp_path):
    wheels = tmp_path / "wheels"
    build = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-w", str(wheels), str(ROOT)],
        capture_output=True, text=True, timeout=300,
    )
    assert build.returncode == 0, build.stderr[-2000:]
    (wheel,) = wheels.glob("archcalc-*.whl")
    with zipfile.ZipFile(wheel) as archive:  # one top-level package: nothing to clash with another project's
        tops = {name.split("/")[0] for name in archive.namelist()}
    assert {top for top in tops if not top.endswith(".dist-info")} == {"archcalc"}, tops
    assert any(name.startswith("archcalc/codegen/") for name in archive.namelist())
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(system_site_packages=True, with_pip=False).create(env_dir)
    python = env_dir / "bin" / "python"
    install = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "--no-index", str(wheel)],
        capture_output=True, text=True, timeout=300,
    )
    if install.returncode != 0 and "no such option: --python" in install.stderr:
        pytest.skip("pip too old for --python")
    assert install.returncode == 0, install.stderr[-2000:]
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    where = subprocess.run([str(python), "-c", "import archcalc, os; print(os.path.dirname(archcalc.__file__))"],
                           capture_output=True, text=True, cwd=elsewhere, env=env, timeout=60)
    package_dir = Path(where.stdout.strip())
    assert package_dir.is_relative_to(env_dir), package_dir  # the wheel, not the checkout
    assert (package_dir / "_spec" / "gpt3.yaml").is_file() and (package_dir / "py.typed").is_file()
    assert {p.name for p in (package_dir / "_guides").glob("*.md")} >= {"training.md", "inference.md", "solve.md", "limits.md"}
    run = subprocess.run([str(env_dir / "bin" / "archcalc"), "count", "gpt3", "--size", "175b", "--json"],
                         capture_output=True, text=True, cwd=elsewhere, env=env, timeout=120)
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["results"][0]["total"] == 174_604_259_328
