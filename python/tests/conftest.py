"""Fixtures of the distzo package's tests: the shared assets and the command line to
compare with (DISTZO_CLI, else build/distzo of this checkout)."""
import os
import pathlib

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def assets() -> pathlib.Path:
    path = pathlib.Path(os.environ.get("DISTZO_ASSETS", REPO.parent / "shared" / "assets")).resolve()
    if not (path / "stories260K" / "stories260K.bin").exists():
        pytest.fail(f"assets not found in {path}: set DISTZO_ASSETS")
    return path


@pytest.fixture(scope="session")
def cli() -> str:
    path = os.environ.get("DISTZO_CLI", str(REPO / "build" / "distzo"))
    if not os.access(path, os.X_OK):
        pytest.fail(f"the command line {path} is not built: set DISTZO_CLI")
    return path
