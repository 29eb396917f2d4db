#!/usr/bin/env python3
"""The gate's build, kept between gate runs on one machine: what `actions/cache` of `target/` is to the GitHub
gate (.github/workflows/gate.yml), for `.ci/run` on a fresh clone.

usage: scripts/build_cache.py restore|save [--target-dir DIR] [--cache DIR]

`save` keeps every unit `target/debug/` holds (its `deps/` and `examples/` files, build-script outputs and
fingerprints), the registry crates' and the workspace's own, and beside them the checkout's sources as they were
built: each tracked file unchanged since its commit, with its git blob id and its modification time. `restore` puts
the units back into the empty `target/debug/` of a fresh clone, before the first build, and gives each tracked file
whose blob is the one recorded its recorded modification time. Cargo then finds fresh every unit whose sources did
not change (a unit's hash and its fingerprint's paths are workspace-relative or the registry's, never the clone's;
a workspace unit is fresh when no file of its dep-info is newer than its fingerprint) and builds the rest: the
crates a commit touched and those above them. A fresh clone's files are otherwise all newer than any build, and the
whole workspace would be built again. What reads the checkout's path at run time does not take it from the build
(`sim::checkout`, `nats_api::crds::checkout`): a unit kept from an earlier clone is compiled with that clone's
path.

Files are hard links where the cache and the target are on one filesystem, except what cargo and rustc write in
place (fingerprints, dep-info `.d` files, build-script directories), which are copied both ways, so a build in one
clone never changes the cache or another clone: rustc and the linker write a library or an executable to a new file
and rename it over the old (measured), so a rebuilt unit leaves the linked file alone. One cache per Cargo.lock and
compiler (the key); `save` replaces it whole and keeps the newest two keys.

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
# (examples/ holds the examples' units: `cargo clippy --all-targets` checks them, `cargo test` builds them.)
KEPT_DIRS = ("deps", "build", ".fingerprint", "examples")
UNIT = re.compile(r"^(?:lib)?(?P<name>.+?)-(?P<hash>[0-9a-f]{16})(?:\..*)?$")
KEEP_KEYS = 2
# The record of the checkout's sources as they were built, beside the units in a key's directory.
SOURCES = "sources.json"


def is_unit(entry: str) -> bool:
    """An entry of deps/, build/ or .fingerprint/ is a unit's (and kept) when it is named like one."""
    return bool(UNIT.match(entry))


def written_in_place(rel: Path) -> bool:
    """Whether cargo, rustc or a build script may write the file at `rel` (under target/debug) in place when its
    unit is built again: a fingerprint, a dep-info file, a build script's directory. Such files are copied, never
    linked, or a build in one clone would change the cache and the clones linked to it."""
    top = rel.parts[0] if rel.parts else ""
    return top in (".fingerprint", "build") or (top in ("deps", "examples") and rel.suffix == ".d")


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


def parse_ls_files(out: str) -> dict[str, str]:
    """`git ls-files -s -z`: each tracked path and its blob id ("<mode> <blob> <stage>\t<path>\0")."""
    blobs: dict[str, str] = {}
    for record in out.split("\0"):
        if "\t" not in record:
            continue
        meta, path = record.split("\t", 1)
        fields = meta.split()
        if len(fields) == 3 and fields[0] != "160000":  # a submodule is no file to stamp
            blobs[path] = fields[1]
    return blobs


def parse_changed(out: str) -> set[str]:
    """`git status --porcelain=v1 -z --untracked-files=no`: the tracked paths whose worktree or index differs from
    the commit (a rename's record carries its source as the next field, which is skipped)."""
    changed: set[str] = set()
    fields = out.split("\0")
    i = 0
    while i < len(fields):
        record = fields[i]
        i += 1
        if len(record) < 4:
            continue
        changed.add(record[3:])
        if record[0] in "RC":
            i += 1
    return changed


def stamps_to_restore(recorded: dict[str, list], blobs: dict[str, str], changed: set[str]) -> dict[str, int]:
    """The modification time (ns) to give each file of the checkout: those whose content is what was built (the
    same blob, unchanged in the worktree) get the time they had then; a changed, new or unrecorded file keeps its
    own (the clone's, newer than any build: cargo builds what reads it)."""
    stamps: dict[str, int] = {}
    for path, blob in blobs.items():
        was = recorded.get(path)
        if path in changed or not was or len(was) != 2:
            continue
        if was[0] == blob and isinstance(was[1], int):
            stamps[path] = was[1]
    return stamps


def rebase_dep_info(data: bytes, old: str, new: str) -> bytes:
    """A cargo dep-info fingerprint file (`.fingerprint/*/dep-*`) with each path under the checkout `old` moved under
    `new`. Cargo keeps a path relative where it is under the package or the target directory, and absolute
    elsewhere: clippy's record of the workspace's `Cargo.toml` is one, so a clippy unit kept from an earlier clone
    names that clone's manifest, and cargo would check it again once that clone is gone. A path there is its length
    (u32, little-endian) and its bytes; an occurrence of `old` that does not read as one is left as it is."""
    old_b = old.rstrip("/").encode() + b"/"
    new_b = new.rstrip("/").encode() + b"/"
    out = bytearray()
    i = 0
    while (j := data.find(old_b, i)) >= 0:
        length = int.from_bytes(data[j - 4:j], "little") if j - 4 >= i else 0
        end = j + length
        if length >= len(old_b) and end <= len(data) and b"\0" not in data[j:end]:
            moved = new_b + data[j + len(old_b):end]
            out += data[i:j - 4] + len(moved).to_bytes(4, "little") + moved
            i = end
        else:
            out += data[i:j + len(old_b)]
            i = j + len(old_b)
    out += data[i:]
    return bytes(out)


def rebase_fingerprints(debug: Path, old: str, new: str) -> int:
    """Moves the paths of every dep-info fingerprint under `debug` from the checkout `old` to `new`, keeping each
    file's modification time (cargo's reference for the unit's sources); returns the files changed."""
    if not old or old == new:
        return 0
    changed = 0
    for dep in (debug / ".fingerprint").glob("*/dep-*"):
        data = dep.read_bytes()
        moved = rebase_dep_info(data, old, new)
        if moved != data:
            st = dep.stat()
            dep.write_bytes(moved)
            os.utime(dep, ns=(st.st_atime_ns, st.st_mtime_ns))
            changed += 1
    return changed


class CacheError(Exception):
    pass


def link_or_copy(src: Path, dst: Path) -> None:
    try:
        os.link(src, dst)
    except OSError as e:
        if e.errno not in (errno.EXDEV, errno.EPERM, errno.EMLINK):
            raise
        shutil.copy2(src, dst)


def link_tree(src: Path, dst: Path, rel: Path) -> int:
    """dst becomes a tree of src's files, `rel` being src's path under target/debug: links, but copies of what is
    written in place (and across filesystems); returns the files placed."""
    n = 0
    dst.parent.mkdir(parents=True, exist_ok=True)
    if src.is_dir() and not src.is_symlink():
        dst.mkdir(parents=True, exist_ok=True)
        for child in src.iterdir():
            n += link_tree(child, dst / child.name, rel / child.name)
    elif src.is_symlink():
        os.symlink(os.readlink(src), dst)
        n = 1
    elif written_in_place(rel):
        shutil.copy2(src, dst)
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


def checkout_state(repo: Path) -> tuple[dict[str, str], set[str]]:
    """The checkout's tracked files (path → blob) and those changed since its commit."""
    blobs = parse_ls_files(run(["git", "ls-files", "-s", "-z"], repo))
    changed = parse_changed(run(["git", "status", "--porcelain=v1", "-z", "--untracked-files=no"], repo))
    return blobs, changed


def record_sources(repo: Path) -> dict:
    """The checkout's path, and each tracked file unchanged since the commit: its blob and its modification time
    (ns), as built."""
    blobs, changed = checkout_state(repo)
    recorded: dict[str, list] = {}
    for path, blob in blobs.items():
        if path in changed:
            continue
        try:
            recorded[path] = [blob, os.lstat(repo / path).st_mtime_ns]
        except OSError:
            continue
    return {"root": str(repo), "files": recorded}


def stamp_sources(repo: Path, recorded: dict[str, list]) -> tuple[int, int]:
    """Gives the checkout's files unchanged since the build their modification times of then, and every other
    tracked file the time of now: newer than any build the cache holds, even one saved after this clone was made
    (by another clone's run), so cargo builds what reads it. Returns how many of each."""
    blobs, changed = checkout_state(repo)
    stamps = stamps_to_restore(recorded, blobs, changed)
    now = time.time_ns()
    for path in blobs:
        st = os.lstat(repo / path) if os.path.lexists(repo / path) else None
        if st is None:
            continue
        os.utime(repo / path, ns=(st.st_atime_ns, stamps.get(path, now)), follow_symlinks=False)
    return len(stamps), len(blobs) - len(stamps)


def restore_tree(debug: Path, root: Path, key: str) -> tuple[bool, str]:
    """Places the cache of `key` into an empty `debug` (target/debug); whether it did, and what it did."""
    cached = root / key / "debug"
    if not cached.is_dir():
        return False, f"no cache for key {key} (Cargo.lock and rustc): a cold build"
    present = [d for d in KEPT_DIRS if (debug / d).exists()]
    if present:
        return False, f"{debug} already holds {', '.join(present)}: left as it is (restore fills a fresh clone's)"
    start = time.monotonic()
    files = sum(link_tree(cached / d, debug / d, Path(d)) for d in KEPT_DIRS if (cached / d).is_dir())
    return True, f"restored {files} files of key {key} in {time.monotonic() - start:.1f} s"


def save_tree(debug: Path, root: Path, key: str, sources: dict | None = None) -> str:
    """Replaces the cache of `key` with `debug`'s units and the record of the `sources` they were built from,
    drops all but the newest keys; says what it did."""
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
            if is_unit(entry):
                files += link_tree(src / entry, fresh / "debug" / d / entry, Path(d) / entry)
    fresh.mkdir(parents=True, exist_ok=True)
    (fresh / SOURCES).write_text(json.dumps(sources or {}, sort_keys=True))
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
    return f"saved {files} files and {len((sources or {}).get('files', {}))} sources' times as key {key} in " \
           f"{time.monotonic() - start:.1f} s{tail}"


def restore(repo: Path, target: Path, root: Path) -> str:
    key = current_key(repo)
    restored, said = restore_tree(target / "debug", root, key)
    if not restored:
        return said
    try:
        record = json.loads((root / key / SOURCES).read_text())
        built_in, recorded = str(record["root"]), dict(record["files"])
    except (OSError, ValueError, KeyError, TypeError):
        return f"{said}; no record of the sources: the workspace's crates are built again"
    start = time.monotonic()
    stamped, kept = stamp_sources(repo, recorded)
    rebased = rebase_fingerprints(target / "debug", built_in, str(repo))
    return f"{said}; {stamped} unchanged sources given their build-time modification times, {kept} changed or " \
           f"new; {rebased} fingerprints moved from {built_in} ({time.monotonic() - start:.1f} s)"


def save(repo: Path, target: Path, root: Path) -> str:
    return save_tree(target / "debug", root, current_key(repo), record_sources(repo))


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
