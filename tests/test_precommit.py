"""The real `pre-commit try-repo` against this repository's .pre-commit-hooks.yaml.

pre-commit builds a virtualenv and pip-installs kvdoctor into it, so this needs a package index
(a local one configured for pip, or PyPI); it is skipped with the reason when there is none.
The working tree is copied into a fresh git repository and committed there, so uncommitted
changes are what gets tested.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlparse

import pytest

from kvdoctor.ticket.sections import BEGIN

ROOT = Path(__file__).resolve().parents[1]
TICKETS = ROOT / "tests" / "fixtures" / "tickets"
GIT = shutil.which("git")
PRE_COMMIT = shutil.which("pre-commit") or shutil.which("pre-commit", path=str(Path(sys.executable).parent))


def _pip_config() -> str:
    done = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True, check=False)
    return done.stdout


def _index_available() -> bool:
    """A local index/wheel directory configured for pip, or PyPI over the network."""
    for token in _pip_config().replace("'", " ").split():
        if token.startswith("file://") and Path(urlparse(token).path).exists():
            return True
    try:
        with socket.create_connection(("pypi.org", 443), timeout=5):
            return True
    except OSError:
        return False


pytestmark = [
    pytest.mark.skipif(GIT is None, reason="git is not installed"),
    pytest.mark.skipif(PRE_COMMIT is None, reason="pre-commit is not installed"),
]


def _git(cwd: Path, *args: str) -> None:
    config = [
        "-c",
        "user.name=kvdoctor tests",
        "-c",
        "user.email=t@example.invalid",
        "-c",
        "commit.gpgsign=false",
        "-c",
        "init.defaultBranch=main",
    ]
    subprocess.run([str(GIT), *config, *args], cwd=cwd, check=True, capture_output=True)


def _copy_of_this_repo(dest: Path) -> Path:
    """The working tree (tracked and untracked, not ignored) committed into a new repository."""
    listed = subprocess.run(
        [str(GIT), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=False,
    )
    if listed.returncode != 0:
        pytest.skip("the kvdoctor sources are not a git checkout; try-repo needs one")
    for name in filter(None, listed.stdout.decode().split("\0")):
        source = ROOT / name
        if source.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest / name)
    _git(dest, "init", "-q")
    _git(dest, "add", "-A")
    _git(dest, "commit", "-q", "-m", "kvdoctor under test")
    return dest


def _try_repo(repo: Path, tickets: Path, hook: str, home: Path, *files: str) -> subprocess.CompletedProcess[str]:
    which = ["--files", *files] if files else ["--all-files"]
    env = dict(os.environ, PRE_COMMIT_HOME=str(home), PRE_COMMIT_COLOR="never")
    return subprocess.run(
        [str(PRE_COMMIT), "try-repo", str(repo), hook, *which],
        cwd=tickets,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )


def test_hooks_fix_then_pass_and_check_fails_on_a_contradiction(tmp_path: Path) -> None:
    if not _index_available():
        pytest.skip("no package index reachable: pre-commit cannot pip-install kvdoctor")
    repo = _copy_of_this_repo(tmp_path / "kvdoctor")
    tickets = tmp_path / "incidents"
    tickets.mkdir()
    names = ["INC-0096-bug-template.md", "INC-0081-raised-util.md", "INC-0100-no-log.md"]
    for name in names:
        shutil.copy(TICKETS / name, tickets / name)
    _git(tickets, "init", "-q")
    _git(tickets, "add", "-A")
    home = tmp_path / "pre-commit-home"

    first = _try_repo(repo, tickets, "kvdoctor-ticket", home)
    assert first.returncode == 1, first.stdout + first.stderr
    assert "files were modified by this hook" in first.stdout
    assert BEGIN in (tickets / names[0]).read_text(encoding="utf-8")
    assert BEGIN in (tickets / names[1]).read_text(encoding="utf-8")
    assert (tickets / names[2]).read_bytes() == (TICKETS / names[2]).read_bytes()

    _git(tickets, "add", "-A")
    fixed = {name: (tickets / name).read_bytes() for name in names}
    second = _try_repo(repo, tickets, "kvdoctor-ticket", home)
    assert second.returncode == 0, second.stdout + second.stderr
    assert {name: (tickets / name).read_bytes() for name in names} == fixed

    check = _try_repo(repo, tickets, "kvdoctor-ticket-check", home)
    assert check.returncode == 1, check.stdout + check.stderr
    assert "contradicts log 1" in check.stdout and names[1] in check.stdout
    assert "files were modified" not in check.stdout

    clean = _try_repo(repo, tickets, "kvdoctor-ticket-check", home, names[0], names[2])
    assert clean.returncode == 0, clean.stdout + clean.stderr
