#!/usr/bin/env python3
"""Cuts a release: bumps every version, checks, commits and tags (`just release X.Y.Z`).

usage: scripts/release.py X.Y.Z [--dry-run] [--date YYYY-MM-DD] [--gate] [--allow-dirty]

One version for the workspace, the chart and the images. In order:

1. Refuses, before writing anything: a version that is not X.Y.Z (pre-releases X.Y.Z-rc.N allowed), one below
   the workspace's, or equal to it once tagged; an existing tag vX.Y.Z; an empty `## [Unreleased]` section in
   CHANGELOG.md; uncommitted changes to a file the release writes; any other uncommitted change unless
   `--allow-dirty` (the release commit takes only its own files, by path, either way).
2. Writes: Cargo.toml's `[workspace.package] version` (every crate inherits it) and the workspace members in
   Cargo.lock; the chart's `version` and `appVersion`; the Dockerfile's `ARG VERSION` default; the version the
   chart goldens and docs/install.md's examples name; CHANGELOG.md's Unreleased section becomes
   `## [X.Y.Z] - DATE` under a new, empty Unreleased. Equal versions (the first release, whose version the tree
   already carries) change only CHANGELOG.md. Then the cluster controller's upgrade goldens record the NATS
   servers' revisions this release renders (`RENDER_RELEASE=1`, operators/cluster/testdata/renders/
   released-revisions.txt): the next release's notes must say it restarts NATS servers while they differ.
3. Checks (`--gate`: the whole of .ci/run instead): Cargo.lock current, CRD drift, helm lint, the chart tests
   (the chart's version is the workspace's; the goldens), the NatsCluster render goldens and the upgrade
   notes' rule, the Dockerfile's ARGs, cargo deny, the scripts' unit tests. A failure puts every file back as it was and exits 1. With other changes uncommitted
   (`--allow-dirty`), the checks run in a git worktree of HEAD holding the release's edits alone — what the
   release commit will hold — and the files are written only once they pass.
4. Commits the files it wrote (`release X.Y.Z`), tags the commit `vX.Y.Z` (annotated, the CHANGELOG section as
   its message), and packages the tagged chart into `<target>/chart/`.

`--dry-run` prints the plan — each file's diff and every command, in order — and changes nothing.
The plan is computed by pure functions (`plan`), which scripts/test_release.py tests.
"""

from __future__ import annotations

import argparse
import datetime
import difflib
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CHART = "deploy/helm/nats-operators"
CARGO_TOML = "Cargo.toml"
CARGO_LOCK = "Cargo.lock"
CHART_YAML = f"{CHART}/Chart.yaml"
DOCKERFILE = "deploy/image/Dockerfile"
CHANGELOG = "CHANGELOG.md"
GOLDENS = ["deploy/helm/testdata/default.golden.yaml", "deploy/helm/testdata/full.golden.yaml"]
INSTALL_MD = "docs/install.md"
# The NATS servers' revisions this release renders, which the cluster controller's upgrade goldens compare the
# next release's with (operators/cluster/src/objects/upgrade_goldens.rs): written by a test, not edited here.
RELEASED_REVISIONS = "operators/cluster/testdata/renders/released-revisions.txt"
# Every file a release may write, in the order the plan shows them.
FILES = [CARGO_TOML, CARGO_LOCK, CHART_YAML, DOCKERFILE, *GOLDENS, INSTALL_MD, CHANGELOG]

VERSION_RE = re.compile(r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?:-([0-9A-Za-z.-]+))?$")


class ReleaseError(Exception):
    """A refusal with its reason; main prints it and exits 1."""


# ---- versions


def parse_version(text: str) -> tuple[int, int, int, tuple]:
    """A sortable key of X.Y.Z[-pre]; a pre-release sorts below its release (semver's precedence)."""
    m = VERSION_RE.match(text)
    if not m:
        raise ReleaseError(f"{text!r} is not a version X.Y.Z (or X.Y.Z-pre)")
    pre = m.group(4)
    if pre is None:
        pre_key: tuple = (1,)
    else:
        pre_key = (0, *[(0, int(p), "") if p.isdigit() else (1, 0, p) for p in pre.split(".")])
    return int(m.group(1)), int(m.group(2)), int(m.group(3)), pre_key


def workspace_version(cargo_toml: str) -> str:
    section = _section(cargo_toml, "workspace.package")
    m = re.search(r'^version\s*=\s*"([^"]+)"', section, re.MULTILINE)
    if not m:
        raise ReleaseError("Cargo.toml: [workspace.package] sets no version")
    return m.group(1)


def workspace_members(cargo_toml: str) -> list[str]:
    """The names of the crates the workspace's path dependencies name (`name = { path = ... }`)."""
    section = _section(cargo_toml, "workspace.dependencies")
    return re.findall(r'^([A-Za-z0-9_-]+)\s*=\s*\{\s*path\s*=', section, re.MULTILINE)


def _section(toml: str, name: str) -> str:
    m = re.search(rf"^\[{re.escape(name)}\]\n(.*?)(?=^\[|\Z)", toml, re.MULTILINE | re.DOTALL)
    if not m:
        raise ReleaseError(f"Cargo.toml has no [{name}] section")
    return m.group(1)


# ---- the edits, each a pure function of a file's text


def bump_cargo_toml(text: str, new: str) -> str:
    m = re.search(r"^\[workspace\.package\]\n", text, re.MULTILINE)
    if not m:
        raise ReleaseError("Cargo.toml has no [workspace.package] section")
    head, tail = text[: m.end()], text[m.end() :]
    tail, n = re.subn(r'^(version\s*=\s*)"[^"]+"', rf'\g<1>"{new}"', tail, count=1, flags=re.MULTILINE)
    if n != 1:
        raise ReleaseError("Cargo.toml: [workspace.package] sets no version")
    return head + tail


def bump_cargo_lock(text: str, members: list[str], old: str, new: str) -> str:
    """The version of each workspace member (a [[package]] without a source) from old to new."""
    out = []
    for block in re.split(r"(?=^\[\[package\]\]\n)", text, flags=re.MULTILINE):
        name = re.search(r'^name = "([^"]+)"$', block, re.MULTILINE)
        if block.startswith("[[package]]") and name and name.group(1) in members and "\nsource = " not in block:
            block = block.replace(f'\nversion = "{old}"\n', f'\nversion = "{new}"\n', 1)
        out.append(block)
    return "".join(out)


def bump_chart_yaml(text: str, new: str) -> str:
    text, n = re.subn(r"^version: .*$", f"version: {new}", text, count=1, flags=re.MULTILINE)
    text, m = re.subn(r"^appVersion: .*$", f'appVersion: "{new}"', text, count=1, flags=re.MULTILINE)
    if n != 1 or m != 1:
        raise ReleaseError(f"{CHART_YAML}: no `version:` or no `appVersion:` line")
    return text


def bump_dockerfile(text: str, new: str) -> str:
    text, n = re.subn(r"^ARG VERSION=.*$", f"ARG VERSION={new}", text, count=1, flags=re.MULTILINE)
    if n != 1:
        raise ReleaseError(f"{DOCKERFILE}: no `ARG VERSION=` line")
    return text


def bump_golden(text: str, old: str, new: str) -> str:
    """The two labels of every rendered object that name the chart's version."""
    text = text.replace(f"app.kubernetes.io/version: {old}\n", f"app.kubernetes.io/version: {new}\n")
    return text.replace(f"helm.sh/chart: nats-operators-{old}\n", f"helm.sh/chart: nats-operators-{new}\n")


def bump_install_md(text: str, old: str, new: str) -> str:
    """The image names and archive paths of docs/install.md's examples."""
    text = re.sub(rf"(-controller):{re.escape(old)}\b", rf"\g<1>:{new}", text)
    return re.sub(rf"(-controller)-{re.escape(old)}\.oci\.tar", rf"\g<1>-{new}.oci.tar", text)


def cut_changelog(text: str, version: str, date: str) -> str:
    """`## [Unreleased]`'s content becomes `## [version] - date`, under a new empty Unreleased."""
    m = re.search(r"^## \[Unreleased\][^\n]*\n(.*?)(?=^## \[|\Z)", text, re.MULTILINE | re.DOTALL)
    if not m:
        raise ReleaseError(f"{CHANGELOG}: no `## [Unreleased]` section")
    if re.search(rf"^## \[{re.escape(version)}\]", text, re.MULTILINE):
        raise ReleaseError(f"{CHANGELOG}: a section for {version} exists already")
    body = m.group(1).strip("\n")
    if not body.strip():
        raise ReleaseError(f"{CHANGELOG}: the Unreleased section is empty; say what the release changes")
    rest = text[m.end() :]
    return text[: m.start()] + f"## [Unreleased]\n\n## [{version}] - {date}\n\n{body}\n" + ("\n" + rest if rest else "")


def changelog_section(text: str, version: str) -> str:
    m = re.search(rf"^## \[{re.escape(version)}\][^\n]*\n(.*?)(?=^## \[|\Z)", text, re.MULTILINE | re.DOTALL)
    return m.group(1).strip() if m else ""


# ---- the plan


@dataclass
class Plan:
    version: str
    current: str
    edits: dict[str, str] = field(default_factory=dict)  # path -> new text (only files that change)
    record: list[str] = field(default_factory=list)  # writes RELEASED_REVISIONS, after the edits
    checks: list[list[str]] = field(default_factory=list)
    commit: list[str] = field(default_factory=list)
    tag: list[str] = field(default_factory=list)
    package: list[str] = field(default_factory=list)


CHECKS = [
    ["cargo", "fetch", "--locked"],  # Cargo.lock needs no change
    ["cargo", "run", "-q", "-p", "nats-api", "--bin", "crdgen", "--", "--check"],
    ["python3", "scripts/helm.py", "lint", "--strict", CHART],
    ["cargo", "nextest", "run", "-p", "e2e", "--test", "api", "-E", "test(/^chart_(render|values)::/)"],
    # The renders of every story's NatsCluster as their goldens, and the upgrade notes' rule.
    ["cargo", "nextest", "run", "-p", "cluster-controller", "--lib", "-E", "test(/upgrade_goldens::/)"],
    ["cargo", "nextest", "run", "-p", "e2e", "--test", "image", "-E",
     "test(=every_binary_has_a_final_stage_with_cargo_toml_s_values)"],
    ["cargo", "deny", "--all-features", "check", "--hide-inclusion-graph", "licenses", "bans", "sources"],
    ["python3", "-m", "unittest", "discover", "-s", "scripts", "-p", "test_*.py"],
]
GATE = [["bash", ".ci/run"]]
RECORD = ["env", "RENDER_RELEASE=1", "cargo", "nextest", "run", "-p", "cluster-controller", "--lib", "-E",
          "test(/upgrade_goldens::a_changed_revision_is_named_in_the_upgrade_notes$/)"]


def plan(version: str, files: dict[str, str], tags: list[str], date: str, target_dir: str,
         gate: bool = False) -> Plan:
    """What `release version` does, from the files' current text and the repository's tags."""
    new_key = parse_version(version)
    current = workspace_version(files[CARGO_TOML])
    cur_key = parse_version(current)
    tag = f"v{version}"
    if tag in tags:
        raise ReleaseError(f"tag {tag} exists already")
    if new_key < cur_key:
        raise ReleaseError(f"{version} is below the workspace's version {current}")
    p = Plan(version=version, current=current)
    new = dict(files)
    if version != current:
        members = workspace_members(files[CARGO_TOML])
        new[CARGO_TOML] = bump_cargo_toml(files[CARGO_TOML], version)
        new[CARGO_LOCK] = bump_cargo_lock(files[CARGO_LOCK], members, current, version)
        new[CHART_YAML] = bump_chart_yaml(files[CHART_YAML], version)
        new[DOCKERFILE] = bump_dockerfile(files[DOCKERFILE], version)
        for g in GOLDENS:
            new[g] = bump_golden(files[g], current, version)
        new[INSTALL_MD] = bump_install_md(files[INSTALL_MD], current, version)
    new[CHANGELOG] = cut_changelog(files[CHANGELOG], version, date)
    p.edits = {path: new[path] for path in FILES if new[path] != files[path]}
    p.record = list(RECORD)
    p.checks = [list(c) for c in (GATE if gate else CHECKS)]
    paths = [*p.edits, RELEASED_REVISIONS]
    why = (f"The workspace, the chart and the images at {version}; CHANGELOG.md's section for it."
           if version != current else f"CHANGELOG.md's section for {version}, the version the tree carries.")
    p.commit = ["git", "commit", "-q", "-m", f"release {version}", "-m", why, "--", *paths]
    message = f"{version}\n\n{changelog_section(new[CHANGELOG], version)}\n"
    # The commit is named when it exists (main reads it back right after committing): in a tree others
    # commit to as well, HEAD a moment later may be theirs.
    # verbatim: git's default cleanup would drop the section's `### Added` lines as comments.
    p.tag = ["git", "tag", "-a", "--cleanup=verbatim", tag, "-m", message, "COMMIT"]
    p.package = ["python3", "scripts/helm.py", "package", CHART, "-d", f"{target_dir}/chart"]
    return p


def diff(path: str, before: str, after: str) -> str:
    return "".join(difflib.unified_diff(before.splitlines(True), after.splitlines(True), f"a/{path}", f"b/{path}"))


def show(cmd: list[str]) -> str:
    """A command as a shell line; a long argument (the tag's message) by its first line."""
    def one(a: str) -> str:
        if "\n" in a and len(a) > 60:
            a = a.split("\n", 1)[0] + " …"
        return a if re.fullmatch(r"[\w./=:@+,-]+", a) else repr(a)

    return " ".join(one(a) for a in cmd)


# ---- the repository


def git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, check=True, capture_output=True, text=True).stdout


def refuse_dirty(paths: list[str], allow_dirty: bool) -> None:
    mine = git("status", "--porcelain", "--", *paths).strip()
    if mine:
        raise ReleaseError(f"uncommitted changes in files the release writes:\n{mine}")
    if not allow_dirty:
        other = git("status", "--porcelain", "--untracked-files=no").strip()
        if other:
            raise ReleaseError(f"uncommitted changes (commit them, or --allow-dirty to leave them out):\n{other}")


def run(cmd: list[str], cwd: Path = ROOT, env: dict[str, str] | None = None) -> None:
    print(f"$ {show(cmd)}", flush=True)
    subprocess.run(cmd, cwd=cwd, env=env, check=True)


def check_in_worktree(p: Plan, target_dir: str) -> str:
    """The checks on HEAD with the release's edits, in a git worktree of their own: what the release commit
    will hold, without the uncommitted changes `--allow-dirty` leaves out of it. Cargo builds into the main
    target directory: the dependencies are reused and only the workspace's crates are built again (as the
    worktree's, beside the tree's; a target directory of its own cost a cold build of everything, measured as
    a load of 19 on this 2-core machine). A binary cargo copies to the top of the target directory
    (`target/debug/crdgen`) is the worktree's until the next cargo build in the tree copies the tree's back.
    Returns the released revisions the release recorded there."""
    tmp = Path(tempfile.mkdtemp(prefix=f"release-{p.version}-"))
    tree = tmp / "tree"
    git("worktree", "add", "--detach", "--quiet", str(tree), "HEAD")
    try:
        print(f"checking HEAD with the release's edits in {tree} (other uncommitted changes left out)")
        for path, text in p.edits.items():
            (tree / path).write_text(text)
        env = dict(os.environ, CARGO_TARGET_DIR=target_dir)
        run(p.record, cwd=tree, env=env)
        for cmd in p.checks:
            run(cmd, cwd=tree, env=env)
        return (tree / RELEASED_REVISIONS).read_text()
    finally:
        git("worktree", "remove", "--force", str(tree))
        shutil.rmtree(tmp, ignore_errors=True)


def package_tagged(p: Plan) -> None:
    """The chart packaged from the tagged commit (a worktree of it), not from a tree others may be editing."""
    tmp = Path(tempfile.mkdtemp(prefix=f"release-{p.version}-chart-"))
    tree = tmp / "tree"
    git("worktree", "add", "--detach", "--quiet", str(tree), f"v{p.version}")
    try:
        run(p.package, cwd=tree)
    finally:
        git("worktree", "remove", "--force", str(tree))
        shutil.rmtree(tmp, ignore_errors=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("version", help="X.Y.Z")
    parser.add_argument("--dry-run", action="store_true", help="print the plan, change nothing")
    parser.add_argument("--date", default=datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d"),
                        help="the release's date in CHANGELOG.md (default today, UTC)")
    parser.add_argument("--gate", action="store_true", help="run the whole gate (.ci/run) as the checks")
    parser.add_argument("--allow-dirty", action="store_true",
                        help="release with other files uncommitted (they stay out of the release commit)")
    opts = parser.parse_args()
    try:
        if not re.fullmatch(r"\d{4}-\d{2}-\d{2}", opts.date):
            raise ReleaseError(f"--date {opts.date}: not YYYY-MM-DD")
        files = {path: (ROOT / path).read_text() for path in FILES}
        tags = git("tag", "--list").split()
        meta = subprocess.run(["cargo", "metadata", "--no-deps", "--format-version", "1", "--quiet"], cwd=ROOT,
                              check=True, capture_output=True, text=True).stdout
        found = re.search(r'"target_directory":"([^"]+)"', meta)
        target = found.group(1) if found else str(ROOT / "target")
        p = plan(opts.version, files, tags, opts.date, target, opts.gate)
        if not opts.dry_run:
            refuse_dirty([*p.edits, RELEASED_REVISIONS], opts.allow_dirty)
        print(f"release {p.version} (the workspace is at {p.current})")
        for path, text in p.edits.items():
            print(diff(path, files[path], text), end="")
        steps = [p.record, *p.checks, p.commit, p.tag, p.package]
        if opts.dry_run:
            print("\nthen:")
            for cmd in steps:
                print(f"  $ {show(cmd)}")
            print("\ndry run: nothing written")
            return 0
        if git("status", "--porcelain", "--untracked-files=no").strip():
            try:
                revisions = check_in_worktree(p, target)
            except subprocess.CalledProcessError as e:
                raise ReleaseError(f"{show(e.cmd)} failed (exit {e.returncode}); nothing written") from e
            for path, text in p.edits.items():
                (ROOT / path).write_text(text)
            (ROOT / RELEASED_REVISIONS).write_text(revisions)
        else:
            before = (ROOT / RELEASED_REVISIONS).read_text()
            for path, text in p.edits.items():
                (ROOT / path).write_text(text)
            try:
                run(p.record)
                for cmd in p.checks:
                    run(cmd)
            except subprocess.CalledProcessError as e:
                for path in p.edits:
                    (ROOT / path).write_text(files[path])
                (ROOT / RELEASED_REVISIONS).write_text(before)
                raise ReleaseError(f"{show(e.cmd)} failed (exit {e.returncode}); every file put back as it was") from e
        run(p.commit)
        commit = git("log", "-1", "--format=%H", f"--grep=^release {re.escape(p.version)}$", "HEAD").strip()
        if not commit:
            raise ReleaseError(f"no commit `release {p.version}` found after committing")
        run([commit if a == "COMMIT" else a for a in p.tag])
        package_tagged(p)
        print(f"released {p.version}: commit {git('rev-parse', '--short', 'HEAD').strip()}, tag v{p.version}; "
              "`just image` builds its images")
    except ReleaseError as e:
        print(f"release: {e}", file=sys.stderr)
        return 1
    except subprocess.CalledProcessError as e:
        print(f"release: {show(e.cmd)} failed (exit {e.returncode})", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
