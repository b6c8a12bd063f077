"""Every shell command in README.md and docs/*.md, checked offline against the code, so no doc drifts from it.

A command is a line of a shell code block (```sh, ```bash or an unlabelled block) or an inline `code span`
that starts with a command (python, .venv/bin/..., make, kubectl, pulumi, ansible-playbook, ...) and has
arguments. What can be checked without a cloud or a cluster is:

- `make <target>`: the Makefile has the target;
- `python -m scaler <command> --flag ...`: the command exists and its argparse parser has every flag;
  `python bench/<script>.py --flag`: the script's --help lists it; `python -m gpuburst_infra.offline FILE`;
- a command a reader runs (a code block, or a span with flags) uses the virtualenv (`.venv/bin/...`);
  the scaler's own command line in its container (`/etc/gpuburst/...`) is not one;
- `ansible-playbook <playbook> -e key=value`: the playbook exists, each key is declared by a role's
  argument specs or read by the playbooks, `-e @file` exists, `--limit` names an inventory group;
- the files and folders a command reads exist (those an earlier command of the same page writes aside);
- `kubectl get ... -o json` snapshots have `-A` (the scaler plans with every namespace's pods);
- kubeconfigs are `~/.kube/gpuburst-<stack>`, and one written from `--show-secrets` is written under `umask 077`.
"""

from __future__ import annotations

import argparse
import importlib
import itertools
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest
import yaml

from scaler.cli import COMMANDS
from scaler.core.config.settings import parse_config

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SHELL_BLOCKS = {"", "sh", "bash", "shell", "console"}
STARTS = ("python", "python3", ".venv/bin/", "make", "kubectl", "pulumi", "ansible-playbook", "helm", "docker",
          "cosign", "pytest", "(umask", "mkdir", "PYTHONPATH=", "KUBECONFIG=", "UPDATE_SNAPSHOTS=")
VENV_TOOLS = {"python", "python3", "pytest", "ansible-playbook", "ansible-doc", "ansible-lint", "ruff", "mypy"}
STACKS = {"aws-dev", "aws-prod", "azure-dev", "azure-prod", "<env>", "<stack>"}
PATH_SUFFIXES = (".yaml", ".yml", ".json", ".csv", ".py", ".md", ".toml", ".txt", ".sh", ".in", ".lock")
OUTPUT_FLAGS = {"--report", "--plot", "--output", "--out", "-o", "--shadow", "--sweep-out"}

# Lines of pages other people own that fail a check today: reported, kept visible here until fixed.
# (page, start of the command) -> why
KNOWN: dict[tuple[str, str], str] = {
    ("docs/platform.md", "python -m scaler simulate --trace"): "bare python: use .venv/bin/python",
    ("docs/platform.md", "ansible-playbook gpuburst.cluster.cluster -e env="): "bare ansible-playbook: use "
                                                                                ".venv/bin/ansible-playbook",
}


@dataclass(frozen=True)
class Command:
    page: str
    line: int
    text: str
    fenced: bool

    def __str__(self) -> str:
        return f"{self.page}:{self.line}: {self.text}"


def _is_command(text: str) -> bool:
    return text.startswith(STARTS)


def extract(path: Path) -> list[Command]:
    """The page's commands: code block lines (continuations joined) and inline code spans."""
    page = str(path.relative_to(ROOT))
    lines = path.read_text(encoding="utf-8").splitlines()
    out: list[Command] = []
    prose: list[tuple[int, str]] = []
    block: str | None = None
    pending, start = "", 0
    for number, line in enumerate(lines, 1):
        fence = re.match(r"^\s*```(\w*)", line)
        if fence:
            block = fence.group(1) if block is None else None
            continue
        if block is None:
            prose.append((number, line))
            continue
        if block not in SHELL_BLOCKS:
            continue
        text = line.strip().removeprefix("$ ")
        if pending:
            text = pending + " " + text
        else:
            start = number
        if text.endswith("\\"):
            pending = text[:-1].strip()
            continue
        pending = ""
        text = re.sub(r"\s+#\s.*$", "", text).strip()
        if _is_command(text):
            out.append(Command(page, start, text, True))
        elif text.startswith("[-") and out and out[-1].fenced and out[-1].page == page and \
                out[-1].line + out[-1].text.count("\n") + 1 == number:  # a synopsis' next line of [--options]
            out[-1] = Command(page, out[-1].line, out[-1].text + "\n" + text, True)
    joined, offsets = "", []
    for number, line in prose:
        offsets.append((len(joined), number))
        joined += line + " "
    for match in re.finditer(r"`([^`]+)`", joined):
        text = " ".join(match.group(1).split())
        if _is_command(text) and " " in text:
            number = next(n for offset, n in reversed(offsets) if offset <= match.start())
            out.append(Command(page, number, text, False))
    return out


ALL = [c for page in DOCS for c in extract(page)]


def test_the_docs_have_commands_to_check() -> None:
    pages = {c.page for c in ALL}
    assert {"README.md", "docs/operations.md", "docs/simulator.md", "docs/ansible.md"} <= pages
    assert sum(1 for c in ALL if "-m scaler" in c.text) >= 10


def _simple(text: str) -> list[list[str]]:
    """The simple commands of a line, as argv lists (redirections kept as tokens)."""
    text = re.sub(r"<([\w.-]+)>", r"__\1__", text)  # placeholders (<env>) are not redirections
    text = re.sub(r"\[[^\]]*\]", lambda m: m.group(0).replace("|", ","), text)  # nor a synopsis' [a|b] pipes
    lexer = shlex.shlex(text.replace("(", " ").replace(")", " "), posix=True, punctuation_chars=";&|<>")
    lexer.whitespace_split = True
    try:
        tokens = list(lexer)
    except ValueError:
        tokens = text.split()
    out, current = [], []
    for token in tokens:
        if token in (";", "&&", "|", "||", "&"):
            out.append(current)
            current = []
        else:
            current.append(token)
    out.append(current)
    result = []
    for argv in out:
        start = 0
        while start < len(argv) and re.match(r"^[A-Z_]+=", argv[start]):  # VAR=value prefixes
            start += 1
        if argv[start:]:
            result.append(argv[start:])
    return result


@cache
def make_targets() -> set[str]:
    text = (ROOT / "Makefile").read_text(encoding="utf-8")
    return set(re.findall(r"^([a-z][\w-]*):", text, re.M))


@cache
def scaler_options(command: str) -> set[str]:
    module = importlib.import_module(COMMANDS[command][0])
    parser = argparse.ArgumentParser()
    module.add_arguments(parser)
    return set(parser._option_string_actions)


@cache
def script_help(script: str) -> str:
    proc = subprocess.run([sys.executable, script, "--help"], capture_output=True, text=True, cwd=ROOT, check=False,
                          timeout=120)
    return proc.stdout


@cache
def ansible_declared() -> set[str]:
    declared = {"env"}
    for spec in ROOT.glob("**/roles/*/meta/argument_specs.yml"):
        for entry in (yaml.safe_load(spec.read_text(encoding="utf-8"))["argument_specs"] or {}).values():
            declared |= set((entry or {}).get("options") or {})
    for playbook in (ROOT / "ansible_collections/gpuburst/cluster/playbooks").glob("*.yml"):
        declared |= set(re.findall(r"\b([a-z][a-z0-9_]+)\s*\|\s*default", playbook.read_text(encoding="utf-8")))
    return declared


@cache
def inventory_groups() -> set[str]:
    groups: set[str] = set()

    def walk(node: object) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                if key not in ("hosts", "vars", "children"):
                    groups.add(str(key))
                walk(value)

    walk(yaml.safe_load((ROOT / "inventories/example/hosts.yml").read_text(encoding="utf-8")))
    return groups


def _pathlike(token: str) -> bool:
    if token.startswith(("~", "/", "$", "<", "../", "-", "http", "@")) or "__" in token or \
            any(c in token for c in "<>:*{}=[]|"):
        return False
    return "/" in token or token.endswith(PATH_SUFFIXES)


def _outputs(argv: list[str]) -> set[str]:
    out = set()
    tokens = [t.strip("[]") for t in argv]  # a synopsis' [--report out.json]
    for i, token in enumerate(tokens[:-1]):
        if token in (">", ">>") or token in OUTPUT_FLAGS:
            out.add(tokens[i + 1].removeprefix("$PWD/"))
    return out


def problems(command: Command, written: set[str]) -> list[str]:
    """What is wrong with one command (empty: nothing offline can find)."""
    found: list[str] = []
    text = command.text
    if "--show-secrets" in text and ">" in text and "umask 077" not in text:
        found.append("a secret written without `umask 077`: the file would be readable by everyone")
    for kube in re.findall(r"~/\.kube/(\S*)", text):
        if not (kube.startswith("gpuburst-") and kube.removeprefix("gpuburst-").rstrip(")") in STACKS):
            found.append(f"~/.kube/{kube}: a stack's kubeconfig is ~/.kube/gpuburst-<stack>")
    container = "/etc/gpuburst" in text
    for argv in _simple(text):
        tool = argv[0].removeprefix(".venv/bin/")
        args = [a.strip("[]").rstrip(".") for a in argv[1:] if a.strip("[]") not in ("", "...")]
        if tool in VENV_TOOLS and not argv[0].startswith(".venv/bin/") and not container and \
                (command.fenced or any(a.startswith("-") and a != "-m" for a in args)):
            found.append(f"{argv[0]}: the tools are in the virtualenv, write .venv/bin/{tool}")
        checked_paths = False
        if tool == "make":
            found += [f"make {t}: no such target in the Makefile" for t in args
                      if not t.startswith("-") and t not in make_targets()]
        elif tool in ("python", "python3") and args[:2] == ["-m", "scaler"]:
            checked_paths = True
            rest = args[2:]
            if rest and rest[0] not in ("--version", "--help", "-h"):
                if rest[0] not in COMMANDS:
                    found.append(f"python -m scaler {rest[0]}: no such command ({', '.join(COMMANDS)})")
                else:
                    options = scaler_options(rest[0])
                    found += [f"python -m scaler {rest[0]} {a}: no such option" for a in rest[1:]
                              if a.startswith("-") and a.split("=")[0] not in options]
        elif tool in ("python", "python3") and args[:2] == ["-m", "gpuburst_infra.offline"]:
            checked_paths = True
        elif tool in ("python", "python3") and args and args[0].endswith(".py"):
            checked_paths = True
            if (ROOT / args[0]).is_file():
                usage = script_help(args[0])
                found += [f"{args[0]} {a}: not in its --help" for a in args[1:]
                          if a.startswith("--") and a.split("=")[0] not in usage]
        elif tool == "pytest":
            checked_paths = True
        elif tool == "ansible-playbook":
            checked_paths = True
            found += ansible_problems(args)
        elif tool == "kubectl" and args[:1] == ["get"] and "--raw" not in args:
            json_out = any(re.fullmatch(r"(-o|--output)=?json|-ojson", a) for a in args) or \
                any(a in ("-o", "--output") and b == "json" for a, b in itertools.pairwise(args))
            if json_out and not {"-A", "--all-namespaces", "-n", "--namespace"} & set(args):
                found.append("kubectl get ... -o json: a snapshot needs -A (every namespace's pods)")
        if checked_paths:
            outputs = _outputs(argv)
            values = [v for a in args for v in ([a.split("=", 1)[1]] if "=" in a else [a])]
            for token in values:
                if _pathlike(token) and token not in outputs and token not in written and not (ROOT / token).exists():
                    found.append(f"{token}: no such file or folder in the repository")
        written |= _outputs(argv)
    return found


def ansible_problems(args: list[str]) -> list[str]:
    found: list[str] = []
    positional = [a for i, a in enumerate(args) if not a.startswith("-") and (i == 0 or args[i - 1] not in
                                                                              ("-e", "--limit", "-i", "-l"))]
    for playbook in positional:
        name = playbook.removeprefix("gpuburst.cluster.")
        if not (ROOT / "ansible_collections/gpuburst/cluster/playbooks" / f"{name}.yml").is_file() and \
                not (ROOT / playbook).is_file():
            found.append(f"ansible-playbook {playbook}: no such playbook")
    for flag, value in itertools.pairwise(args):
        if flag in ("-e", "--extra-vars"):
            if value.startswith("@"):
                if not (ROOT / value[1:]).is_file():
                    found.append(f"-e {value}: no such file")
                continue
            if value.startswith("{"):
                continue
            for pair in value.split():
                key = pair.split("=", 1)[0]
                if key not in ansible_declared():
                    found.append(f"-e {key}: no role declares it (meta/argument_specs.yml) and no playbook reads it")
        if flag in ("--limit", "-l") and value not in inventory_groups():
            found.append(f"--limit {value}: no such group in inventories/example/hosts.yml")
    return found


def _page_problems(page: Path) -> list[str]:
    written: set[str] = set()
    lines = []
    for command in extract(page):
        known = next((why for (p, head), why in KNOWN.items() if p == command.page and command.text.startswith(head)),
                     None)
        found = problems(command, written)
        if found and known is None:
            lines.append(f"{command}\n    " + "\n    ".join(found))
    return lines


@pytest.mark.parametrize("page", DOCS, ids=[str(p.relative_to(ROOT)) for p in DOCS])
def test_every_command_in_the_page_works_as_written(page: Path) -> None:
    assert _page_problems(page) == []


@pytest.mark.parametrize(("text", "wanted"), [
    ("make tests", "no such target"),
    ("python -m scaler simulate --trace t.csv --pools examples/pools-aws.yaml", ".venv/bin/python"),
    (".venv/bin/python -m scaler simulate --trace t.csv --pools examples/pools-aws.yaml --outage x", "--outage"),
    (".venv/bin/python -m scaler simulates --trace t.csv", "no such command"),
    (".venv/bin/python -m scaler explain --snapshot s.json --pools examples/scaler-gcp.yaml", "examples/scaler-gcp"),
    ("kubectl get pods,nodes -o json > snap.json", "-A"),
    (".venv/bin/ansible-playbook gpuburst.cluster.cluster -e enviro=aws-dev", "-e enviro"),
    (".venv/bin/ansible-playbook gpuburst.cluster.gpu_host --limit gpu_host", "--limit gpu_host"),
    ("pulumi stack output kubeconfig --show-secrets -s aws-dev > ~/.kube/gpuburst-aws-dev", "umask 077"),
    ("(umask 077; pulumi stack output kubeconfig --show-secrets -s aws-dev > ~/.kube/gpuburst-dev)",
     "~/.kube/gpuburst-<stack>"),
    (".venv/bin/python bench/simulate_traces.py --tracez x", "--tracez"),
    (".venv/bin/python -m scaler simulate --trace PATH\n[--scheduler default|binpack] [--bogus]", "--bogus"),
])
def test_the_checks_catch_what_the_docs_got_wrong(text: str, wanted: str) -> None:
    found = problems(Command("doc.md", 1, text, True), set())
    assert any(wanted in f for f in found), found


def test_a_right_command_passes() -> None:
    for text in ("(umask 077; mkdir -p ~/.kube; pulumi stack output kubeconfig --show-secrets -s aws-dev > "
                 "~/.kube/gpuburst-aws-dev)",
                 ".venv/bin/python -m scaler simulate --trace ../shared/traces/PHILLY-A.csv --pools "
                 "examples/pools-aws.yaml --spot-outage us-east-1a:36000:43200 --report outage.json --plot outage.png",
                 "kubectl get pods,nodes -A -o json > snap.json",
                 ".venv/bin/ansible-playbook gpuburst.cluster.gpu_host -e gpuburst_gpu_hosts=image_builders"):
        assert problems(Command("doc.md", 1, text, True), set()) == []


def written_into_the_clone(command: Command) -> list[str]:
    """The files a command writes inside the clone that git would see (a `>` redirection or an output flag; a
    placeholder such as FILE and kubectl's `-o FORMAT` are not files): each belongs under an ignored folder."""
    paths = [out for argv in _simple(command.text) if argv[0] != "kubectl" for out in _outputs(argv)
             if not out.startswith(("~", "/", "$", "-", "<")) and "__" not in out and not out.isupper()]
    if not paths:
        return []
    shown = subprocess.run(["git", "check-ignore", "--no-index", "--verbose", "--non-matching", *paths], cwd=ROOT,
                           capture_output=True, text=True, check=False).stdout.splitlines()
    return [line.split("\t")[-1] for line in shown if line.startswith("::")]


@pytest.mark.skipif(not (ROOT / ".git").exists(), reason="not a git clone: no .gitignore to check against")
def test_no_command_writes_into_the_clone_where_git_would_see_it() -> None:
    """A reader who runs the docs' commands keeps a clean `git status`: outputs go under out/ (ignored)."""
    found = [f"{c}: writes {', '.join(paths)}" for c in ALL if (paths := written_into_the_clone(c))]
    assert found == []


@pytest.mark.skipif(not (ROOT / ".git").exists(), reason="not a git clone: no .gitignore to check against")
def test_the_output_check_catches_a_file_in_the_root() -> None:
    text = ".venv/bin/python -m scaler simulate --trace t.csv --pools p.yaml --report outage.json --plot out/o.png"
    assert written_into_the_clone(Command("doc.md", 1, text, True)) == ["outage.json"]
    sweep = ".venv/bin/python -m scaler simulate --trace t.csv --pools p.yaml --sweep buffer_gpus=0,8 --sweep-out sweep"
    assert written_into_the_clone(Command("doc.md", 1, sweep, True)) == ["sweep"]


# Spans that look like repository paths but name something else: (page, text) -> what it is.
NOT_PATHS: dict[tuple[str, str], str] = {
    ("docs/platform.md", "pulumi/actions"): "the GitHub Action pulumi/actions",
    ("docs/platform.md", "pulumi/auth-actions"): "the GitHub Action pulumi/auth-actions",
}
TOP_LEVEL = {p.name for p in ROOT.iterdir()} - {".git", "out"}  # out/: where the documented commands write (ignored)


def _alternatives(text: str) -> list[str]:
    """`a/{b,c}.py` -> a/b.py, a/c.py."""
    brace = re.search(r"\{([^}]*)\}", text)
    if brace is None:
        return [text]
    return [p for alt in brace.group(1).split(",") for p in _alternatives(text[:brace.start()] + alt +
                                                                          text[brace.end():])]


def named_paths(page: str, text: str) -> list[tuple[str, Path]]:
    """(as written, where it must be) for each repository path in a code span (`scaler/loop.py`: its first part a
    top-level file or folder) and each relative link target ([x](../charts/README.md#part), from the page)."""
    out = []
    base = (ROOT / page).parent
    for match in re.finditer(r"`([^`\s]+)`|\]\(([^)\s#]+)(?:#[^)]*)?\)", text):
        span, link = match.group(1), match.group(2)
        written = (span or link).rstrip(".,;)")
        if written.startswith(("http", "mailto:", "~", "$", "/", "#")) or any(c in written for c in "<>=@$"):
            continue
        if span is not None and ("/" not in written or written.split("/")[0] not in TOP_LEVEL):
            continue
        if (page, written) in NOT_PATHS:
            continue
        root = ROOT if span is not None else base
        out += [(written, root / alt.split(":")[0]) for alt in _alternatives(written)]
    return out


def _exists(path: Path) -> bool:
    return any(path.parent.glob(path.name)) if "*" in path.name else path.exists()


def _missing(page: str, text: str) -> list[str]:
    return [written for written, path in named_paths(page, text) if not _exists(path)]


@pytest.mark.parametrize("page", DOCS, ids=[str(p.relative_to(ROOT)) for p in DOCS])
def test_every_path_the_page_names_exists(page: Path) -> None:
    rel = str(page.relative_to(ROOT))
    assert _missing(rel, page.read_text(encoding="utf-8")) == []


def test_the_path_check_catches_a_moved_file() -> None:
    text = ("`scaler/core/model/objects/keys.py` and `scaler/core/model/keys.py`, `scaler/sim/{plot,nope}.py`, "
            "[ops](operations.md#x), [gone](gone.md), `pulumi/actions@v6`, `kubectl get nodes`")
    assert _missing("docs/x.md", text) == ["scaler/core/model/objects/keys.py", "scaler/sim/{plot,nope}.py",
                                           "gone.md"]


def test_no_page_quotes_a_commit() -> None:
    """A figure is what a command prints today, not what some commit printed: no commit hashes in the docs."""
    hashes = [f"{page.relative_to(ROOT)}: {m.group(0)}" for page in DOCS
              for m in re.finditer(r"(?<![\w:/.-])[0-9a-f]{7,40}(?![\w-])", page.read_text(encoding="utf-8"))
              if re.search(r"[a-f]", m.group(0)) and re.search(r"\d", m.group(0))]
    assert hashes == []


# The scaler's commands the docs show that this test does not run on a fresh clone, by subcommand: why.
NOT_RUN = {
    "run": "acts on a cluster and its cloud",
    "snapshot": "reads a cluster (tests/scaler/runtime/test_snapshot_command.py runs it against an API server)",
    "import-pools": "reads the cloud's groups",
    "trace": "reads a Prometheus",
    "simulate": "minutes to hours on the traces the docs name, some outside the repository; its options are "
                "checked against its parser above, and `make demo` runs it on the bundled sample",
    "tune": "many simulations: minutes at least; its options are checked against its parser above",
}
# The values a reader gives the shell variables of a page's commands.
SHELL_VALUES = {"CLUSTER": "ml-eks", "REGION": "us-east-1", "ACCOUNT": "123456789012", "SUB": "sub-1", "RG": "ml-rg",
                "QUEUE_ARN": "arn:aws:sqs:us-east-1:123456789012:ml-eks-interruptions",
                "ISSUER": "https://oidc.eks.us-east-1.amazonaws.com/id/EXAMPLE"}


def _scaler_commands() -> list[Command]:
    """Fenced commands of the scaler's CLI and of the Pulumi program's offline run, synopses left out."""
    return [c for c in ALL if c.fenced and re.search(r"(^|\s|&& )\.venv/bin/python -m (scaler \w|gpuburst_infra)",
                                                     c.text) and "[-" not in c.text]


def _verdict(command: Command) -> str | None:
    """None: run it; else why not."""
    sub = re.search(r"-m scaler ([\w-]+)", command.text)
    if sub is not None and sub.group(1) in NOT_RUN:
        return NOT_RUN[sub.group(1)]
    files = [t for argv in _simple(command.text) for t in argv[1:] if _pathlike(t) and t not in _outputs(argv)]
    missing = [f for f in files if not (ROOT / f).exists()]
    return f"reads {', '.join(missing)}, which a command above writes from a cluster" if missing else None


@pytest.mark.parametrize("command", _scaler_commands(), ids=str)
def test_the_scaler_command_runs_as_written(command: Command, tmp_path: Path) -> None:
    why = _verdict(command)
    if why is not None:
        pytest.skip(why)
    text = command.text.replace(".venv/bin/python", shlex.quote(sys.executable))
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "W": str(tmp_path), **SHELL_VALUES}
    proc = subprocess.run(["bash", "-euo", "pipefail", "-c", text], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=300, check=False)
    assert proc.returncode == 0, f"{command}\n{proc.stderr[-2000:]}"


# Figures: every measured figure the docs quote is written by a command, between the markers of the command that
# writes it (`<!-- bench/plan_scale.py: begin -->` ... `<!-- bench/plan_scale.py: end -->`, bench/doc_blocks.py),
# never typed by hand. A figure is a number with a unit of measure: a dollar amount, a percentage, a duration (ms,
# s, min, h), a size (MB, GB, GiB), a ratio written `2x` or to three places (`1.0454`), GPU-hours, instance-hours,
# instances, a bench's `key=value` output, and a number under a table header with a unit (`cost $`, `p95 s`).
# Not figures: numbers in code spans and in code blocks of commands or config (the options and settings
# themselves), a bound (`≤ 0.5 s`: a target), a duration equal to one of the scaler's default settings (`10 s`,
# `240 s`, `15 min`: that setting), `N x` with spaces (a product: 8 x A100), versions, dates and ports.
GENERATED = re.compile(r"<!-- (?P<name>[^>]+?): begin -->.*?<!-- (?P=name): end -->", re.S)
_NUMBER = r"\d[\d,]*(?:\.\d+)?"
FIGURE = re.compile(
    rf"(?<![\w.$/=#:-])(?:\$\s?{_NUMBER}k?|{_NUMBER}(?:\s?(?:-|\u2013|to)\s?{_NUMBER})?"
    r"(?:\s?%|\s?(?:ms|s|min|minutes?|h|hours?|MB|GB|GiB|MiB|GPU-h|GPU-hours|instance-hours|instances)\b|[x\u00d7]\b))"
    r"|\b[a-z][a-z0-9_]*_(?:s|mb|usd)=" + _NUMBER
    + r"|(?<![\w.])(?:1\.\d{3,}|0\.[1-9]\d{2,})(?![\w.])")  # a measured ratio: paid / demand 1.0454, spot share 0.943
MEASURED_COLUMN = re.compile(r"\$|(?<![\w-])s$| s\b|%|GPU-h|paid|share|p50|p95|started")
BOUND = re.compile(r"(?:≤|≥|<=|>=|<|>|~)\s*$")
SECONDS = {"ms": 0.001, "s": 1, "min": 60, "minute": 60, "minutes": 60, "h": 3600, "hour": 3600, "hours": 3600}
# Figures that are not measurements, quoted where they stand: (page, figure) -> what it is.
QUOTED: dict[tuple[str, str], str] = {
    ("README.md", "260 s"): "the p95 target: node boot (240 s) + 2 passes (10 s each)",
    ("docs/ansible.md", "8x"): "the GPUs of the recorded nvidia-smi output (8x A100)",
    ("docs/deploy-aws.md", "100 %"): "the mixed instances policy's on-demand / spot percentages the program sets",
    ("docs/operations.md", "30%"): "the interruption storm tests/integration injects",
    ("docs/operations.md", "40 minutes"): "reservation.drain_lead's default",
    ("docs/operations.md", "100 %"): "the largest repair budget the config accepts",
    ("docs/planner.md", "$0.08"): "EBS gp3's list price per GiB-month, as the catalogue has it",
    ("docs/simulator.md", "$0.08"): "EBS gp3's list price per GiB-month, as the catalogue has it",
    ("docs/simulator.md", "60 s"): "Kueue's retry backoff, the trace export's gang window, EC2's retry: constants",
    ("docs/simulator.md", "9 hours"): "what the trace export's test replays",
    ("docs/simulator.md", "12 GiB"): "the trace loader's memory per GPU when a trace has none",
    ("docs/gpu-sharing.md", "22.5 GiB"): "an L4's memory as NVML reports it, from the catalogue",
    ("docs/gpu-sharing.md", "12 GiB"): "the worked example's claim sizes (tests/scaler/sim/test_plan_dra_shares.py)",
    ("docs/gpu-sharing.md", "4 GiB"): "the worked example's step and claim size",
    ("docs/planner.md", "4 GiB"): "the worked example's step and request sizes",
    ("docs/planner.md", "12 GiB"): "the worked example's request sizes",
    ("docs/simulator.md", "$13"): "g6.48xlarge's list price per hour, from the catalogue",
    ("docs/simulator.md", "30-1200 s"): "a bound tune searches (scaler/sim/tune_space.py)",
    ("docs/simulator.md", "5%"): "the plot's margin past the last submission",
    ("docs/simulator.md", "5-10 %"): "the Spot Advisor's interruption buckets",
    ("docs/simulator.md", "10-15 %"): "the Spot Advisor's interruption buckets",
    ("docs/simulator.md", "15-20 %"): "the Spot Advisor's interruption buckets",
    ("docs/simulator.md", "20 %"): "the Spot Advisor's top bucket",
    ("docs/simulator.md", "730 hours"): "a month, in the rate's derivation",
    ("docs/simulator.md", "17.5 %"): "the midpoint of an advisor bucket",
    ("docs/simulator.md", "25 %"): "the rate assumed for the advisor's top bucket",
    ("docs/simulator.md", "2x"): "how far a bucket's edges move the derived rate",
    ("docs/simulator.md", "25x"): "the derived rate for an instance that lives a day against a month",
    ("docs/simulator.md", "60 %"): "the saving of the examples' spot_price_factor (0.4)",
    ("docs/gpu-sharing.md", "80 GB"): "a GPU model's memory (A100 80 GB, H100 80 GB)",
}


@cache
def default_seconds() -> set[float]:
    """Every number among the scaler's default settings (timings are seconds)."""
    cfg = parse_config({"cluster": "c", "cloud": "aws", "region": "us-east-1", "pools": [
        {"name": "g", "instance_types": ["g6.xlarge"], "zones": ["us-east-1a"], "max": 1}]}, "defaults")
    found: set[float] = set()

    def walk(node: object) -> None:
        if isinstance(node, dict):
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)
        elif isinstance(node, int | float) and not isinstance(node, bool):
            found.add(float(node))

    walk(cfg.model_dump())
    return found


def _a_setting(figure: str) -> bool:
    """A duration (or a range of them) whose every number is a default setting's in seconds, a percentage or a size
    that is one."""
    unit = re.search(r"([a-zA-Z%]+)$", figure)
    numbers = [float(n.replace(",", "")) for n in re.findall(_NUMBER, figure)]
    if unit is None:
        return False
    if unit.group(1) in SECONDS:
        return all(n * SECONDS[unit.group(1)] in default_seconds() for n in numbers)
    if unit.group(1) == "%":
        return all(n in default_seconds() or n / 100 in default_seconds() for n in numbers)
    return unit.group(1) == "GiB" and all(n in default_seconds() for n in numbers)


def figures(page: str, text: str) -> list[str]:
    """`page:line: figure` for each figure outside a generated block (see above)."""
    text = GENERATED.sub(lambda m: "\n" * m.group(0).count("\n"), text)
    text = re.sub(r"<!--.*?-->", "", text, flags=re.S)
    out = []
    block: str | None = None
    header: list[str] | None = None
    for number, line in enumerate(text.splitlines(), 1):
        fence = re.match(r"^\s*```(\w*)", line)
        if fence:
            block = fence.group(1) if block is None else None
            continue
        if block is not None and (block not in ("", "text", "console") or _is_command(line.strip())):
            continue
        prose = re.sub(r"`[^`]*`|\]\([^)]*\)", " ", line)
        if not prose.startswith("|"):
            header = None
        elif header is None:
            header = [c.strip() for c in prose.strip().strip("|").split("|")]
        else:  # a measured column (its header has a unit) holds figures without one: `| 210,250 |` under `cost $`
            cells = [c.strip() for c in prose.strip().strip("|").split("|")]
            out += [f"{page}:{number}: {cell} ({head})" for head, cell in zip(header, cells, strict=False)
                    if MEASURED_COLUMN.search(head) and re.search(r"\d", cell)]
            continue
        for match in FIGURE.finditer(prose):
            figure = match.group(0)
            if BOUND.search(prose[:match.start()]) or _a_setting(figure) or (page, figure) in QUOTED:
                continue
            out.append(f"{page}:{number}: {figure}")
    return out


@pytest.mark.parametrize("page", DOCS, ids=[str(p.relative_to(ROOT)) for p in DOCS])
def test_every_figure_the_page_quotes_is_written_by_a_command(page: Path) -> None:
    """A figure typed by hand goes stale without a word: put it behind its bench's markers or point at the command."""
    assert figures(str(page.relative_to(ROOT)), page.read_text(encoding="utf-8")) == []


def test_the_figure_check_catches_a_hand_typed_figure() -> None:
    text = """Its output (2026-11-25, load 0.9): the pass took 0.375 - 0.428 s and 700 MB, $1,200 a day.

```
plan_p50_s=0.182 plan_max_s=0.196 rss_mb=68 pods=1000 nodes=2000 pools=100
```

| run | cost $ | p95 s |
|---|---|---|
| default | 210,250 | 248 |

<!-- bench/plan_scale.py: begin -->
```
plan_p50_s=0.182 plan_max_s=0.196 rss_mb=68 pods=1000 nodes=2000 pools=100
```
<!-- bench/plan_scale.py: end -->
Not figures: a target p50 ≤ 0.5 s, the 10 s pass and 15 min provision timeout (defaults), `--hours 48`, 8 x A100.
"""
    assert figures("doc.md", text) == [
        "doc.md:1: 0.375 - 0.428 s", "doc.md:1: 700 MB", "doc.md:1: $1,200",
        "doc.md:4: plan_p50_s=0.182", "doc.md:4: plan_max_s=0.196", "doc.md:4: rss_mb=68",
        "doc.md:9: 210,250 (cost $)", "doc.md:9: 248 (p95 s)"]


def _bench_recipe() -> list[list[str]]:
    """The commands of the Makefile's bench target, as argv after $(PY), output options (`--plots DIR`) left out."""
    text = (ROOT / "Makefile").read_text(encoding="utf-8")
    recipe = re.search(r"^bench:.*\n((?:\t.*\n)+)", text, re.M)
    assert recipe is not None, "the Makefile has no bench target"
    out = []
    for line in recipe.group(1).splitlines():
        argv = shlex.split(line.split(" # ")[0].strip())
        if argv[:1] == ["$(PY)"]:
            argv = argv[1:]
            out.append([a for i, a in enumerate(argv) if a != "--plots" and (i == 0 or argv[i - 1] != "--plots")])
    return out


def test_make_bench_rewrites_every_block_of_figures() -> None:
    """A block no `make bench` command writes would keep its figures for ever: each block's command (its marker's
    name) is run by the bench target with `--readme <its page>`."""
    written = set()
    for argv in _bench_recipe():
        if "--readme" in argv:
            at = argv.index("--readme")
            written.add((argv[at + 1], " ".join(argv[:at] + argv[at + 2:])))
    blocks = {(str(page.relative_to(ROOT)), m.group("name")) for page in DOCS
              for m in GENERATED.finditer(page.read_text(encoding="utf-8"))}
    assert len(blocks) >= 4 and blocks - written == set()


@pytest.mark.parametrize("bench", ["bench/simulate_traces.py", "bench/repair_seeds.py"])
def test_a_bench_whose_block_cannot_be_written_stops_before_it_runs(bench: str, tmp_path: Path) -> None:
    """Its runs take most of an hour: a --readme without the bench's markers is one line at once, not a traceback
    (or the same line) after the runs."""
    page = tmp_path / "page.md"
    page.write_text("no markers here\n", encoding="utf-8")
    for target, said in ((tmp_path / "missing.md", "cannot read it"), (page, "not found")):
        proc = subprocess.run([sys.executable, bench, "--readme", str(target)], capture_output=True, text=True,
                              cwd=ROOT, check=False, timeout=60)
        assert proc.returncode == 2 and proc.stdout == ""
        assert proc.stderr.startswith(f"{target}: ") and said in proc.stderr and proc.stderr.count("\n") == 1
