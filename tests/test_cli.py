"""The command line's conventions on every command: -o table|json|yaml, help with an example that runs and
a doc that exists, exit codes 0 / 1 / 2, --version."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

import click
import pytest
import yaml

from kubesched.cli import COMMANDS as TABLE
from kubesched.cli import SHORT_HELP_LIMIT, main, main_group

ROOT = Path(__file__).resolve().parent.parent
COMMANDS = sorted(TABLE)


def get_command(name: str) -> click.Command:
    """The command `kubesched NAME` runs (its module imported as when it runs)."""
    cmd = main_group.get_command(click.Context(main_group), name)
    assert cmd is not None, name
    return cmd
# Commands whose examples need a live cluster (tests/test_live_*.py run them against the API server test
# double instead), and commands whose examples take minutes (tests/test_tune.py runs them small).
LIVE = {"capture", "scheduler", "descheduler"}
LONG = {"tune", "sweep"}
# A long-running process writes logs (--logging-format text|json), not one document: it has no -o.
DAEMONS = {"scheduler"}
# A command whose output is a document itself (the converted configuration): -o yaml|json, no table.
DOCUMENT_WRITERS = {"convert"}


def help_examples(cmd: click.Command) -> list[str]:
    """The commands listed under Example(s): in a command's help (backslash continuations joined)."""
    out: list[str] = []
    pending = ""
    for line in (cmd.epilog or "").splitlines():
        text = line.strip()
        if pending:
            text = pending + " " + text
            pending = ""
        if text.endswith("\\"):
            pending = text[:-1].strip()
            continue
        if text.startswith("kubesched "):
            out.append(text)
    return out


@pytest.mark.parametrize("name", COMMANDS)
def test_every_command_follows_the_conventions(name: str) -> None:
    cmd = get_command(name)
    if name not in DAEMONS:
        output = next(p for p in cmd.params if p.name == "output")
        formats = ["yaml", "json"] if name in DOCUMENT_WRITERS else ["table", "json", "yaml"]
        assert isinstance(output.type, click.Choice) and list(output.type.choices) == formats
        assert "-o" in output.opts
    short = TABLE[name][1]  # what `kubesched --help` lists
    assert short and len(short) <= SHORT_HELP_LIMIT
    epilog = cmd.epilog or ""
    assert help_examples(cmd) and all(e.startswith(f"kubesched {name} ") for e in help_examples(cmd))
    doc = epilog.split("Docs: ")[1].split()[0]
    assert (ROOT / doc).is_file(), doc
    assert "Exit codes: 0 success; 1 runtime failure" in epilog and "2 bad input" in epilog


@pytest.mark.parametrize("name", sorted(set(COMMANDS) - LIVE - LONG))
def test_help_examples_run(name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                           capsys: pytest.CaptureFixture[str]) -> None:
    """Each example in the help runs as shown from the repository's root (outputs go to a temporary copy)."""
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    monkeypatch.chdir(tmp_path)
    for example in help_examples(get_command(name)):
        args = shlex.split(example)[1:]
        if name == "simulate":
            args += ["--no-progress"]
        assert main(args) == 0, (example, capsys.readouterr().err)
        out = capsys.readouterr().out
        assert out.strip()


ONE_SHOT = {
    "explain": ["explain", "--snapshot", "examples/cluster/snapshot.yaml", "--pod", "shop/web-7d9f-new"],
    "schedule": ["schedule", "--snapshot", "examples/cluster/snapshot.yaml"],
    "capacity": ["capacity", "--snapshot", "examples/cluster/snapshot.yaml", "--pod-template",
                 "examples/cluster/web-pod.yaml"],
    "deschedule": ["deschedule", "--snapshot", "examples/hotspot-descheduling/snapshot.yaml", "--policy",
                   "examples/hotspot-descheduling/lownodeload.yaml", "--now", "2024-06-01T12:00:30Z"],
    "node-pressure": ["node-pressure", "--kubelet-config", "examples/kubelet/kubelet-config.yaml", "--snapshot",
                      "examples/kubelet/snapshot.yaml", "--timeline", "examples/kubelet/timeline.json",
                      "--now", "2025-06-01T12:00:00Z"],
    "qos": ["qos", "--snapshot", "examples/kubelet/snapshot.yaml"],
}


@pytest.mark.parametrize("name", sorted(ONE_SHOT))
def test_yaml_is_the_json_document(name: str, monkeypatch: pytest.MonkeyPatch,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(ROOT)
    assert main([*ONE_SHOT[name], "-o", "json"]) == 0
    as_json = json.loads(capsys.readouterr().out)
    assert main([*ONE_SHOT[name], "-o", "yaml"]) == 0
    assert yaml.safe_load(capsys.readouterr().out) == as_json


def test_exit_codes(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(ROOT)
    # Bad input: 2, one line naming the field.
    assert main(["explain", "--snapshot", "examples/cluster/snapshot.yaml", "--pod", "shop/nope"]) == 2
    err = capsys.readouterr()
    assert err.out == "" and err.err.count("\n") == 1 and "field --pod" in err.err
    # A usage error is bad input too.
    assert main(["explain", "--snapshot", "examples/cluster/snapshot.yaml", "--pod", "x", "-o", "xml"]) == 2
    capsys.readouterr()
    # A server that does not answer: 1, one line, nothing on stdout.
    assert main(["explain", "--snapshot", "examples/cluster/snapshot.yaml", "--pod", "shop/web-7d9f-new",
                 "--metrics", "http://127.0.0.1:9/"]) == 1
    err = capsys.readouterr()
    assert err.out == "" and err.err.count("\n") == 1 and "cannot GET http://127.0.0.1:9/" in err.err
    # --version
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == "kubesched 0.1.0"



def run_python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)


def test_the_list_of_commands_imports_none_of_them() -> None:
    """`kubesched --help`, a bad command name and `import kubesched.cli` load no command module (their
    imports — the simulator, Plotly, the kubernetes client — cost seconds); running one loads only it."""
    r = run_python("import sys\n"
                   "from kubesched.cli import main\n"
                   "codes = [main(['--help']), main(['no-such-command'])]\n"
                   "loaded = sorted(m for m in sys.modules if m.startswith('kubesched.commands.'))\n"
                   "print(codes, loaded, file=sys.stderr)\n"
                   "main(['qos', '--help'])\n"
                   "print(sorted(m for m in sys.modules if m.startswith('kubesched.commands.')), file=sys.stderr)\n")
    first, second = r.stderr.splitlines()[-2:]
    assert first == "[0, 2] ['kubesched.commands.common']", r.stderr
    assert second == "['kubesched.commands.common', 'kubesched.commands.inputs', 'kubesched.commands.qos']", r.stderr
    # The list is the table, in its order, with the line of each.
    rows = [line.split(None, 1) for line in r.stdout.split("Commands:\n")[1].split("\n\n")[0].splitlines()]
    assert [(name, short.strip()) for name, short in rows] == [(n, short) for n, (_, short) in TABLE.items()]


@pytest.mark.parametrize("name,missing", [("capture", "kubernetes"), ("scheduler", "prometheus_client"),
                                          ("descheduler", "kubernetes")])
def test_live_commands_without_the_live_extra(name: str, missing: str) -> None:
    """Without the 'live' extra a live command's help still shows, and running it is one line naming the
    missing module and the extra to install (exit 2), not a traceback."""
    hide = f"import sys\nsys.modules[{missing!r}] = None\nfrom kubesched.cli import main\n"
    assert run_python(hide + f"sys.exit(main([{name!r}, '--help']))").returncode == 0
    args = {"capture": ["--out", "out/never"], "scheduler": [], "descheduler": ["--policy", "p.yaml"]}[name]
    r = run_python(hide + f"sys.exit(main({[name, *args]!r}))")
    assert r.returncode == 2 and r.stdout == "", r.stderr
    assert r.stderr == f"error: {name} needs the kubernetes client{' and prometheus-client' if name != 'capture' else ''} " \
                       f"({missing} is missing): pip install 'kubesched[live]'\n"
    assert not (ROOT / "out/never").exists()

def test_explain_table_scores_only_feasible_nodes(monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """node-3 fails TaintToleration: it is listed with its reason but gets no column of scores."""
    monkeypatch.chdir(ROOT)
    assert main(["explain", "--snapshot", "examples/cluster/snapshot.yaml", "--pod", "shop/web-7d9f-new"]) == 0
    out = capsys.readouterr().out
    filters, scores = out.split("Score:")
    assert "node-3" in filters and "TaintToleration" in filters
    assert "node-3" not in scores and "node-2" in scores
