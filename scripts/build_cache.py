#!/usr/bin/env python3
"""The dependencies' build, kept between gate runs on one machine: what `actions/cache` of `target/` is to
the GitHub gate (.github/workflows/gate.yml), for `.ci/run` on a fresh clone.

usage: scripts/build_cache.py restore|save [--target-dir DIR] [--cache DIR]

`save` keeps what `target/debug/` holds of the crates from the registry (their `deps/` files, build-script
outputs and fingerprints), and nothing of the workspace's own packages: a fresh clone's sources are newer
than any build of them, so cargo would build those again anyway. `restore` puts that back into an empty
`target/debug/` of a fresh clone, before the first build; cargo then finds the registry crates fresh (their
fingerprints name the registry's sources and the workspace-relative unit hashes, which no clone's path
changes) and builds only the workspace.

Files are hard links, not copies, where the cache and the target are on one filesystem: a registry crate's
files are named by a hash of its version, features and profile, so a build that finds one fresh never writes
it, and a changed crate is built under a new name. One cache per Cargo.lock and compiler (the key); `save`
replaces it whole and keeps the newest two keys, so what a changed Cargo.lock left behind is dropped.

Where it lives: $NATS_OPERATORS_CACHE/build (default ~/.cache/nats-operators/build, beside the tools'
caches). NATS_OPERATORS_BUILD_CACHE=off turns both steps into no-ops (a cold build, to measure one).
A cache that cannot be read or written is reported and the build goes on without it: it is never a failure
of the change under test.
"""

from __future__ import annotations

import argparse
import errno
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

# What cargo keeps per unit under target/<profile>/, each entry named "<name>-<16 hex>" (+ extensions).
KEPT_DIRS = ("deps", "build", ".fingerprint")
UNIT = re.compile(r"^(?:lib)?(?P<name>.+?)-(?P<hash>[0-9a-f]{16})(?:\..*)?$")
KEEP_KEYS = 2


def normalize(name: str) -> str:
    """Cargo names a unit by its package (dashes) or its crate (underscores); compare both as one."""
    return name.replace("-", "_")


def workspace_names(metadata: dict) -> set[str]:
    """Every package and target name of the workspace's own packages, normalised."""
    names: set[str] = set()
    for package in metadata.get("packages", []):
        names.add(normalize(package["name"]))
        for target in package.get("targets", []):
            names.add(normalize(target["name"]))
    return names


def is_kept(entry: str, workspace: set[str]) -> bool:
    """An entry of deps/, build/ or .fingerprint/ is cached when it is a unit's and not the workspace's own."""
    m = UNIT.match(entry)
    return bool(m) and normalize(m.group("name")) not in workspace


def cache_key(rustc_version: str, lockfile: bytes) -> str:
    """The compiler and the lockfile: a build with either changed shares too little to be worth restoring."""
    h = hashlib.sha256()
    h.update(rustc_version.encode())
    h.update(b"\0")
    h.update(lockfile)
    return h.hexdigest()[:16]


def stale_keys(keys_by_age: list[str], current: str, keep: int = KEEP_KEYS) -> list[str]:
    """The keys to drop after saving `current`: all but the `keep` newest, `current` counted among them."""
    others = [k for k in keys_by_age if k != current]
    return others[: max(0, len(others) - (keep - 1))]


class CacheError(Exception):
    pass


def link_or_copy(src: Path, dst: Path) -> None:
    try:
        os.link(src, dst)
    except OSError as e:
        if e.errno not in (errno.EXDEV, errno.EPERM, errno.EMLINK):
            raise
        shutil.copy2(src, dst)


def link_tree(src: Path, dst: Path) -> int:
    """dst becomes a tree of links to src's files (copies across filesystems); returns the files linked."""
    n = 0
    dst.parent.mkdir(parents=True, exist_ok=True)
    if src.is_dir() and not src.is_symlink():
        dst.mkdir(parents=True, exist_ok=True)
        for child in src.iterdir():
            n += link_tree(child, dst / child.name)
    elif src.is_symlink():
        os.symlink(os.readlink(src), dst)
        n = 1
    else:
        link_or_copy(src, dst)
        n = 1
    return n


def run(cmd: list[str], cwd: Path) -> str:
    try:
        return subprocess.run(cmd, cwd=cwd, check=True, capture_output=True, text=True).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        raise CacheError(f"{' '.join(cmd)}: {e}") from e


def cache_root() -> Path:
    base = os.environ.get("NATS_OPERATORS_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "nats-operators")
    return Path(base) / "build"


def current_key(repo: Path) -> str:
    lock = repo / "Cargo.lock"
    try:
        lockfile = lock.read_bytes()
    except OSError as e:
        raise CacheError(f"{lock}: {e}") from e
    return cache_key(run(["rustc", "-vV"], repo), lockfile)


def restore_tree(debug: Path, root: Path, key: str) -> str:
    """Links the cache of `key` into an empty `debug` (target/debug); says what it did."""
    cached = root / key / "debug"
    if not cached.is_dir():
        return f"no cache for key {key} (Cargo.lock and rustc): a cold build"
    present = [d for d in KEPT_DIRS if (debug / d).exists()]
    if present:
        return f"{debug} already holds {', '.join(present)}: left as it is (restore fills a fresh clone's)"
    start = time.monotonic()
    files = sum(link_tree(cached / d, debug / d) for d in KEPT_DIRS if (cached / d).is_dir())
    return f"restored {files} files of key {key} in {time.monotonic() - start:.1f} s"


def save_tree(debug: Path, root: Path, key: str, workspace: set[str]) -> str:
    """Replaces the cache of `key` with `debug`'s registry units, drops all but the newest keys; says what."""
    if not debug.is_dir():
        return f"{debug} does not exist: nothing to save"
    start = time.monotonic()
    root.mkdir(parents=True, exist_ok=True)
    fresh = root / f".{key}.{os.getpid()}"
    shutil.rmtree(fresh, ignore_errors=True)
    files = 0
    for d in KEPT_DIRS:
        src = debug / d
        if not src.is_dir():
            continue
        for entry in sorted(os.listdir(src)):
            if is_kept(entry, workspace):
                files += link_tree(src / entry, fresh / "debug" / d / entry)
    old = root / f".{key}.old.{os.getpid()}"
    if (root / key).exists():
        os.rename(root / key, old)
    os.rename(fresh, root / key)
    shutil.rmtree(old, ignore_errors=True)
    by_age = sorted((p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")),
                    key=lambda p: p.stat().st_mtime)
    dropped = stale_keys([p.name for p in by_age], key)
    for name in dropped:
        shutil.rmtree(root / name, ignore_errors=True)
    tail = f"; dropped {', '.join(dropped)}" if dropped else ""
    return f"saved {files} files as key {key} in {time.monotonic() - start:.1f} s{tail}"


def restore(repo: Path, target: Path, root: Path) -> str:
    return restore_tree(target / "debug", root, current_key(repo))


def save(repo: Path, target: Path, root: Path) -> str:
    metadata = json.loads(run(["cargo", "metadata", "--no-deps", "--format-version", "1", "--offline"], repo))
    return save_tree(target / "debug", root, current_key(repo), workspace_names(metadata))


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("action", choices=["restore", "save"])
    parser.add_argument("--target-dir", type=Path)
    parser.add_argument("--cache", type=Path)
    args = parser.parse_args(argv)
    if os.environ.get("NATS_OPERATORS_BUILD_CACHE") == "off":
        print("NATS_OPERATORS_BUILD_CACHE=off: no build cache")
        return 0
    repo = Path(__file__).resolve().parent.parent
    target = args.target_dir or Path(os.environ.get("CARGO_TARGET_DIR") or repo / "target")
    root = args.cache or cache_root()
    try:
        print((restore if args.action == "restore" else save)(repo, target, root))
    except (CacheError, OSError) as e:
        print(f"warning: build cache {args.action}: {e}; going on without it", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
