"""Every shell command in README.md and examples/*/README.md runs as written, in a fresh shell, after the
Quick start — in a copy of the repository with a virtual environment of its own, the way a new user (and
CI) starts.

A shell command is a line of a ```bash (or ```sh) block; a trailing backslash continues it. Commands that
run pytest are not run again here: they are what runs this test (CI runs them itself). A block fenced
```bash live needs a live cluster (the README's capture walk-through) and is not run, and a block fenced
```bash long runs for longer than CI has (a whole sweep of the openb trace: tests/test_tune.py runs sweeps
small); their commands still have to name .venv/bin/.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
READMES = [ROOT / "README.md"] + sorted(ROOT.glob("examples/*/README.md"))
QUICK_START = "## Quick start"


def shell_commands(text: str, live: bool = False) -> list[str]:
    """The commands of the ```bash / ```sh blocks of a Markdown text, in order (with `live`: of the
    ```bash live and ```bash long blocks)."""
    commands: list[str] = []
    fence = r"^```(?:bash|sh|shell) (?:live|long)\n(.*?)^```" if live else r"^```(?:bash|sh|shell)\n(.*?)^```"
    for block in re.findall(fence, text, flags=re.M | re.S):
        pending = ""
        for line in block.splitlines():
            if pending:
                line = pending + " " + line.strip()
                pending = ""
            if line.rstrip().endswith("\\"):
                pending = line.rstrip()[:-1].rstrip()
                continue
            if line.strip() and not line.lstrip().startswith("#"):
                commands.append(line.strip())
        assert not pending, f"a command ends with a backslash: {pending!r}"
    return commands


def quick_start(text: str) -> str:
    start = text.index(QUICK_START)
    end = text.find("\n## ", start + len(QUICK_START))
    return text[start:end if end >= 0 else len(text)]


def runs_tests(cmd: str) -> bool:
    return bool(re.search(r"(^|[\s/])pytest(\s|$)", cmd))


def fresh_env() -> dict[str, str]:
    """This user's environment as a new shell has it: no virtual environment active, no PYTHONPATH."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME", "PYTEST_CURRENT_TEST", "PYTEST_ADDOPTS")}
    ours = {str(Path(sys.prefix) / "bin"), str(ROOT / ".venv" / "bin")}
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if p and p not in ours)
    return env


def run(cmd: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", "-c", cmd], cwd=cwd, env=fresh_env(), capture_output=True, text=True,
                          timeout=900, stdin=subprocess.DEVNULL)


def _explain(cmd: str, proc: subprocess.CompletedProcess[str]) -> str:
    return f"$ {cmd}\nexit {proc.returncode}\n--- stdout\n{proc.stdout[-3000:]}\n--- stderr\n{proc.stderr[-3000:]}"


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the repository's files (as git sees them, without .venv and out/) after its Quick start."""
    repo = tmp_path_factory.mktemp("readme") / "kubesched"
    listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT, capture_output=True,
                            check=True).stdout.decode().split("\0")
    for name in filter(None, listed):
        src = ROOT / name
        if src.is_file():
            dst = repo / name
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dst)
    for cmd in shell_commands(quick_start((ROOT / "README.md").read_text())):
        if runs_tests(cmd):
            continue
        proc = run(cmd, repo)
        assert proc.returncode == 0, _explain(cmd, proc)
    assert (repo / ".venv" / "bin" / "kubesched").exists()
    assert (repo / "out" / "hotspots" / "report.html").exists()
    return repo


def test_every_example_folder_has_a_readme_with_commands() -> None:
    folders = sorted(p for p in (ROOT / "examples").iterdir() if p.is_dir() and not p.name.startswith((".", "_")))
    for folder in folders:
        readme = folder / "README.md"
        assert readme.exists(), f"{folder.name} has no README.md"
        assert shell_commands(readme.read_text()), f"{folder.name}/README.md shows no command to run"


def test_commands_name_the_environment() -> None:
    """Bare `kubesched`, `python` or `pip` fail in a fresh shell: every command names .venv/bin/."""
    for readme in READMES:
        for cmd in shell_commands(readme.read_text()) + shell_commands(readme.read_text(), live=True):
            for part in re.split(r"&&|\|\||;|\|", cmd):
                words = [w for w in part.split() if "=" not in w or w.startswith("-")]
                if not words:
                    continue
                tool = words[0]
                assert tool in ("python3", "xdg-open") or tool.startswith(".venv/bin/"), f"{readme.relative_to(ROOT)}: {cmd}"


@pytest.mark.slow
@pytest.mark.parametrize("readme", READMES, ids=[str(p.relative_to(ROOT)) for p in READMES])
def test_readme_commands_run_as_written(readme: Path, workspace: Path) -> None:
    text = readme.read_text()
    commands = shell_commands(text)
    if readme.name == "README.md" and readme.parent == ROOT:
        done = set(shell_commands(quick_start(text)))
        commands = [c for c in commands if c not in done]
    assert commands or readme.parent == ROOT
    for cmd in commands:
        if runs_tests(cmd):
            continue
        proc = run(cmd, workspace)
        assert proc.returncode == 0, _explain(cmd, proc)
        assert "Traceback" not in proc.stderr, _explain(cmd, proc)
