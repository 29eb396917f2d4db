#!/usr/bin/env python3
"""Builds the controller images offline: no Docker, no registry, no root, no network.

usage: scripts/image.py [--no-build] [--profile P] [--out DIR] [--prefix P] [--dockerfile F] [BINARY ...]

For each binary (default: all three) it writes an OCI image layout as a tar, `<out>/<binary>-<version>.oci.tar`
(default out: `<cargo target dir>/images`), named `<prefix>/<binary>:<version>` (default prefix
`localhost/nats-operators`, the chart's default repositories), and prints the name, the manifest digest, the size
and the path. A node without a registry imports it with `ctr -n k8s.io images import <archive>`.

1. `cargo build --release --locked --target <host triple>` of the three, with
   `RUSTFLAGS=-C target-feature=+crt-static`: glibc linked statically on the gnu target (deploy/image/Dockerfile
   says why that is all a binary needs). With `--target`, cargo applies RUSTFLAGS to the binaries only, not to
   build scripts and proc macros (which cannot be static). Always the three in one invocation, as the Dockerfile
   builds them: cargo unifies the dependencies' features over the packages it builds, so a binary built alone
   would differ (kube's features differ) from the one `just image` and `docker build` give. Cargo reuses what is
   already built. `--no-build` packages what is there. `--profile image-test`
   (Cargo.toml) builds without release's optimisation, for the tests (e2e/tests/image).
2. Refuses a binary that is not static (an ELF PT_INTERP or DT_NEEDED entry), whatever RUSTFLAGS did.
3. Assembles the binary's final stage of deploy/image/Dockerfile, read from that file (ARG, LABEL, USER,
   ENTRYPOINT, `COPY --from=build <file> <path>`, a layer each), so the two cannot drift; any other instruction
   in that stage is refused. A COPY source /out/<file> is the host's release binary, any other the same path on
   the host (the CA bundle of a Debian host's ca-certificates). The ARGs VERSION, LICENSES and SOURCE are given
   Cargo.toml's values.
4. Reproducible: every timestamp is SOURCE_DATE_EPOCH (default 0), files are root-owned and 0755 or 0644 (as
   the host file is executable or not), JSON is canonical, the gzip header carries no time; the same files give
   the same digest.
5. Provenance: the ARGs REVISION (`--revision`, default `git rev-parse HEAD`), SOURCE (`--source`, default
   Cargo.toml's `repository`, else the GitHub repository a workflow runs in) and CREATED (SOURCE_DATE_EPOCH,
   default the HEAD commit's time, in RFC 3339) fill the Dockerfile's org.opencontainers.image.* labels; the
   manifest carries the same keys as OCI annotations (an empty one left out). Built from the same commit, the
   image is the same.
6. An SBOM beside each archive, `<binary>-<version>.cdx.json` (CycloneDX, scripts/sbom.py): the image's files
   and every crate compiled into the binary, from `cargo tree` over the three binaries.
"""

from __future__ import annotations

import argparse
import datetime
import gzip
import hashlib
import io
import json
import os
import re
import shlex
import struct
import subprocess
import sys
import tarfile
import time
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import sbom  # noqa: E402 (scripts/sbom.py, beside this file)

ROOT = Path(__file__).resolve().parent.parent
DOCKERFILE = ROOT / "deploy" / "image" / "Dockerfile"
BINARIES = ["cluster-controller", "auth-controller", "jetstream-controller"]
DEFAULT_PREFIX = "localhost/nats-operators"
RUSTFLAGS = "-C target-feature=+crt-static"
HOW = f"RUSTFLAGS='{RUSTFLAGS}' and --target"
# The build stage's /out holds the release binaries; so does this directory on the host.
BUILD_STAGE, BUILD_OUT = "build", "/out/"

MT_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
MT_INDEX = "application/vnd.oci.image.index.v1+json"
MT_CONFIG = "application/vnd.oci.image.config.v1+json"
MT_LAYER = "application/vnd.oci.image.layer.v1.tar+gzip"
ARCH = {"x86_64": "amd64", "aarch64": "arm64"}


class ImageError(Exception):
    """A refusal with its reason; main prints it and exits 1."""


# ---- deploy/image/Dockerfile, its final stages


@dataclass
class Stage:
    name: str
    base: str  # "scratch" or an earlier stage's name
    line: int
    instructions: list[tuple[int, str, str]] = field(default_factory=list)  # (line, INSTR, rest)


@dataclass
class Image:
    """What a final stage makes: the config fields it sets and its layers, one per COPY."""

    user: str = ""
    entrypoint: list[str] = field(default_factory=list)
    labels: dict[str, str] = field(default_factory=dict)
    layers: list[list[tuple[str, Path]]] = field(default_factory=list)  # per COPY: (path in the image, host file)
    history: list[str] = field(default_factory=list)  # created_by, one per instruction


def instructions(text: str) -> list[tuple[int, str, str]]:
    """The Dockerfile's instructions as (first line, INSTRUCTION, rest), continuations joined."""
    out, buf, start = [], "", 0
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not buf and (not line or line.startswith("#")):
            continue
        if buf and line.startswith("#"):
            continue  # a comment inside a continued instruction
        if not buf:
            start = n
        if line.endswith("\\"):
            buf += line[:-1] + " "
            continue
        buf += line
        word, _, rest = buf.partition(" ")
        out.append((start, word.upper(), rest.strip()))
        buf = ""
    if buf:
        raise ImageError(f"{DOCKERFILE.name}:{start}: the file ends inside a continued line")
    return out


def stages(text: str) -> dict[str, Stage]:
    found: dict[str, Stage] = {}
    current: Stage | None = None
    for line, word, rest in instructions(text):
        if word == "FROM":
            m = re.fullmatch(r"(\S+)\s+AS\s+(\S+)", rest, re.IGNORECASE)
            if not m:
                raise ImageError(f"{DOCKERFILE.name}:{line}: FROM needs `AS <name>` (every stage is named)")
            current = Stage(name=m.group(2).lower(), base=m.group(1), line=line)
            found[current.name] = current
        elif current is not None:
            current.instructions.append((line, word, rest))
        elif word != "ARG":
            raise ImageError(f"{DOCKERFILE.name}:{line}: {word} before the first FROM")
    return found


def substitute(value: str, args: dict[str, str], where: str) -> str:
    def one(m: re.Match[str]) -> str:
        name = m.group(1) or m.group(2)
        if name not in args:
            raise ImageError(f"{where}: ${name} is not an ARG of this stage")
        return args[name]

    return re.sub(r"\$\{(\w+)\}|\$(\w+)", one, value)


def evaluate(all_stages: dict[str, Stage], target: str, build_args: dict[str, str], out_dir: Path) -> Image:
    """The image a final stage makes: its base stages' config first, then its own instructions."""
    chain, name = [], target
    while name != "scratch":
        stage = all_stages.get(name)
        if stage is None:
            raise ImageError(f"{DOCKERFILE.name}: no stage named {name!r} (the binaries: {', '.join(BINARIES)})")
        if stage in chain:
            raise ImageError(f"{DOCKERFILE.name}:{stage.line}: stage {name} is its own base")
        chain.append(stage)
        name = stage.base.lower()
    image = Image()
    for stage in reversed(chain):
        args: dict[str, str] = {}
        for line, word, rest in stage.instructions:
            where = f"{DOCKERFILE.name}:{line}"
            if word == "ARG":
                key, eq, default = rest.partition("=")
                if not re.fullmatch(r"\w+", key):
                    raise ImageError(f"{where}: ARG {rest!r} is not NAME or NAME=default")
                args[key] = build_args.get(key, shlex.split(default)[0] if eq and default else "")
                continue
            if word == "LABEL":
                for token in shlex.split(rest):
                    key, eq, value = token.partition("=")
                    if not eq:
                        raise ImageError(f"{where}: LABEL {token!r} is not key=value")
                    image.labels[substitute(key, args, where)] = substitute(value, args, where)
            elif word == "USER":
                image.user = substitute(rest, args, where)
            elif word == "ENTRYPOINT":
                try:
                    entry = json.loads(rest)
                except json.JSONDecodeError:
                    entry = None
                if not (isinstance(entry, list) and entry and all(isinstance(s, str) for s in entry)):
                    raise ImageError(f"{where}: ENTRYPOINT must be the exec form, a JSON list (no shell in scratch)")
                image.entrypoint = entry
            elif word == "COPY":
                tokens = [substitute(t, args, where) for t in shlex.split(rest)]
                flags = [t for t in tokens if t.startswith("--")]
                paths = [t for t in tokens if not t.startswith("--")]
                if flags != [f"--from={BUILD_STAGE}"] or len(paths) != 2:
                    raise ImageError(f"{where}: COPY must be `COPY --from={BUILD_STAGE} <file> <path>`")
                src, dest = paths
                if not src.startswith("/") or src.endswith("/") or not dest.startswith("/"):
                    raise ImageError(f"{where}: COPY {src} {dest}: a file's absolute path to an absolute path")
                if dest.endswith("/"):
                    dest += src.rsplit("/", 1)[1]
                rest_of = src[len(BUILD_OUT) :]
                host = out_dir / rest_of if src.startswith(BUILD_OUT) and "/" not in rest_of else Path(src)
                image.layers.append([(dest, host)])
            else:
                raise ImageError(f"{where}: {word} in stage {stage.name}: scripts/image.py assembles only "
                                 "ARG, LABEL, USER, ENTRYPOINT and COPY --from=build")
            image.history.append(f"{word} {rest}")
    if not image.layers or not image.entrypoint or not image.user:
        raise ImageError(f"{DOCKERFILE.name}: stage {target} needs a COPY, an ENTRYPOINT and a USER")
    return image


# ---- the binary


def require_static(path: Path) -> None:
    """Refuses a binary that asks for a program interpreter or a shared library."""
    data = path.read_bytes()
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        raise ImageError(f"{path}: not a 64-bit little-endian ELF file")
    phoff, = struct.unpack_from("<Q", data, 0x20)
    phentsize, phnum = struct.unpack_from("<HH", data, 0x36)
    for i in range(phnum):
        p_type, _, p_offset, _, _, p_filesz = struct.unpack_from("<IIQQQQ", data, phoff + i * phentsize)
        if p_type == 3:  # PT_INTERP
            interp = data[p_offset : p_offset + p_filesz].rstrip(b"\0").decode()
            raise ImageError(f"{path}: dynamically linked (interpreter {interp}); build it with {HOW}")
        if p_type == 2:  # PT_DYNAMIC: a static-pie has one, without DT_NEEDED
            for off in range(p_offset, p_offset + p_filesz, 16):
                tag, _ = struct.unpack_from("<qQ", data, off)
                if tag == 0:
                    break
                if tag == 1:
                    raise ImageError(f"{path}: needs a shared library (DT_NEEDED); build it with {HOW}")


# ---- the OCI layout


def digest(blob: bytes) -> str:
    return "sha256:" + hashlib.sha256(blob).hexdigest()


def canonical(obj: object) -> bytes:
    return json.dumps(obj, separators=(",", ":"), sort_keys=True).encode()


def tar_bytes(entries: list[tuple[str, bytes | None, int]], mtime: int) -> bytes:
    """A tar of (name, content or None for a directory, mode), root-owned, every time `mtime`."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        for name, content, mode in entries:
            info = tarfile.TarInfo(name)
            info.mode, info.mtime, info.uid, info.gid, info.uname, info.gname = mode, mtime, 0, 0, "", ""
            if content is None:
                info.type = tarfile.DIRTYPE
                tar.addfile(info)
            else:
                info.size = len(content)
                tar.addfile(info, io.BytesIO(content))
    return buf.getvalue()


def layer_entries(files: list[tuple[str, Path]]) -> list[tuple[str, bytes | None, int]]:
    """Each file with its parent directories, as a COPY makes them; 0755 if executable, else 0644."""
    dirs, out = set(), []
    for dest, host in files:
        parts = dest.strip("/").split("/")
        for i in range(1, len(parts)):
            d = "/".join(parts[:i]) + "/"
            if d not in dirs:
                dirs.add(d)
                out.append((d, None, 0o755))
        if not host.is_file():
            raise ImageError(f"{host}: missing (build it, or drop --no-build; the CA bundle: ca-certificates)")
        mode = 0o755 if os.access(host, os.X_OK) else 0o644
        out.append(("/".join(parts), host.read_bytes(), mode))
    return out


def rfc3339(epoch: int) -> str:
    return datetime.datetime.fromtimestamp(epoch, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


ANNOTATED = "org.opencontainers.image."


def annotations(labels: dict[str, str]) -> dict[str, str]:
    """The manifest's annotations: the image's org.opencontainers.image.* labels that have a value."""
    return {k: v for k, v in sorted(labels.items()) if k.startswith(ANNOTATED) and v}


def oci_archive(image: Image, name: str, tag: str, arch: str, epoch: int) -> tuple[bytes, str, int]:
    """The OCI layout tar, the manifest's digest, the layers' uncompressed size."""
    created = rfc3339(epoch)
    tars = [tar_bytes(layer_entries(files), epoch) for files in image.layers]
    layers = [gzip.compress(t, compresslevel=6, mtime=0) for t in tars]
    config = canonical({
        "created": created,
        "architecture": arch,
        "os": "linux",
        "config": {"User": image.user, "Entrypoint": image.entrypoint, "Labels": image.labels},
        "rootfs": {"type": "layers", "diff_ids": [digest(t) for t in tars]},
        "history": [
            {"created": created, "created_by": f"{h} # scripts/image.py"}
            | ({} if h.startswith("COPY") else {"empty_layer": True})
            for h in image.history
        ],
    })
    manifest = canonical({
        "schemaVersion": 2,
        "mediaType": MT_MANIFEST,
        "config": {"mediaType": MT_CONFIG, "digest": digest(config), "size": len(config)},
        "layers": [{"mediaType": MT_LAYER, "digest": digest(b), "size": len(b)} for b in layers],
        "annotations": annotations(image.labels),
    })
    index = canonical({
        "schemaVersion": 2,
        "mediaType": MT_INDEX,
        "manifests": [{
            "mediaType": MT_MANIFEST,
            "digest": digest(manifest),
            "size": len(manifest),
            "platform": {"architecture": arch, "os": "linux"},
            # containerd (ctr import) names the image by the first, OCI tools by the second.
            "annotations": {"io.containerd.image.name": f"{name}:{tag}", "org.opencontainers.image.ref.name": tag},
        }],
    })
    blobs = [(f"blobs/sha256/{digest(b)[7:]}", b, 0o644) for b in (*layers, config, manifest)]
    archive = tar_bytes(
        [("oci-layout", canonical({"imageLayoutVersion": "1.0.0"}), 0o644), ("index.json", index, 0o644),
         ("blobs/", None, 0o755), ("blobs/sha256/", None, 0o755), *blobs],
        epoch,
    )
    return archive, digest(manifest), sum(len(t) for t in tars)


# ---- cargo


def cargo_metadata() -> dict:
    out = subprocess.run(["cargo", "metadata", "--no-deps", "--format-version", "1"], cwd=ROOT, check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out)


@dataclass
class Provenance:
    revision: str
    source: str
    epoch: int

    @property
    def created(self) -> str:
        return rfc3339(self.epoch)


def provenance(environ: dict[str, str], repository: str, head: str | None, head_time: str | None,
               revision: str | None = None, source: str | None = None) -> Provenance:
    """Where an image comes from. `head`, `head_time`: `git rev-parse HEAD` and the commit's Unix time, None
    outside a git checkout; `revision`, `source`: the command line's, None when not given."""
    if revision is None:
        revision = head or ""
    if source is None:
        source = repository
        if not source and environ.get("GITHUB_SERVER_URL") and environ.get("GITHUB_REPOSITORY"):
            source = f"{environ['GITHUB_SERVER_URL']}/{environ['GITHUB_REPOSITORY']}"
    raw = environ.get("SOURCE_DATE_EPOCH") or head_time or "0"
    if not raw.isdigit():
        raise ImageError(f"SOURCE_DATE_EPOCH={raw}: not a Unix time in seconds")
    return Provenance(revision=revision, source=source, epoch=int(raw))


def git_head() -> tuple[str | None, str | None]:
    """HEAD's commit and its time, or (None, None) outside a git checkout."""
    try:
        out = subprocess.run(["git", "log", "-1", "--format=%H %ct"], cwd=ROOT, check=True,
                             capture_output=True, text=True).stdout.split()
    except (OSError, subprocess.CalledProcessError):
        return None, None
    return (out[0], out[1]) if len(out) == 2 else (None, None)


def cargo_tree(triple: str) -> sbom.Tree:
    cmd = ["cargo", "tree", "--locked", "--target", triple, *sbom.TREE_ARGS]
    for b in BINARIES:
        cmd += ["-p", b]
    out = subprocess.run(cmd, cwd=ROOT, env=build_env(dict(os.environ)), check=True, capture_output=True,
                         text=True).stdout
    return sbom.parse_tree(out)


def host_triple() -> str:
    out = subprocess.run(["rustc", "-vV"], check=True, capture_output=True, text=True).stdout
    m = re.search(r"^host: (\S+)$", out, re.MULTILINE)
    if not m:
        raise ImageError("rustc -vV names no host triple")
    return m.group(1)


# What cargo sets for a crate it builds or a test it runs (CARGO_PKG_NAME, CARGO_MANIFEST_DIR, OUT_DIR,
# NEXTEST_*, ...). A build script that asks to rerun when one changes (ring's asks for five) is compared
# with cargo's own environment, so a build started from a test (whose environment holds the test crate's
# values) would rerun ring's and rebuild everything above it: measured, 9 of a test's 10 minutes under
# load, after .ci/run had built the same binaries. The build's environment is the caller's without them.
INHERITED_FROM_CARGO = re.compile(
    r"^(CARGO_(PKG_|MANIFEST_|CRATE_|BIN_|PRIMARY_PACKAGE|TARGET_TMPDIR|CFG_|ENCODED_RUSTFLAGS|RUSTC_)"
    r"|NEXTEST|OUT_DIR$|RUSTC_BOOTSTRAP$|__CARGO)"
)


# What dates the image, not the binaries: SOURCE_DATE_EPOCH sets the archive's timestamps and its created
# label (`provenance`); rustc embeds no time. ring's build script also asks to rerun when it changes, so a
# build given it (the image tests give it, `.ci/run`'s build of the same binaries does not) reran ring's and
# rebuilt everything above it: measured, the first image test of a gate 250 s against 80, under load.
FOR_THE_IMAGE_ONLY = ("SOURCE_DATE_EPOCH",)


def build_env(environ: dict[str, str]) -> dict[str, str]:
    """The environment of the image build: `environ` without what cargo set for another crate, nor what
    dates the image only."""
    env = {k: v for k, v in environ.items()
           if not INHERITED_FROM_CARGO.match(k) and k not in FOR_THE_IMAGE_ONLY}
    env["RUSTFLAGS"] = RUSTFLAGS
    return env


def build(binaries: list[str], triple: str, profile: str) -> None:
    env = build_env(dict(os.environ))
    cmd = ["cargo", "build", "--profile", profile, "--locked", "--target", triple]
    for b in binaries:
        cmd += ["-p", b]
    print(f"$ RUSTFLAGS='{RUSTFLAGS}' {' '.join(cmd)}", flush=True)
    start = time.monotonic()
    subprocess.run(cmd, cwd=ROOT, env=env, check=True)
    print(f"built in {time.monotonic() - start:.1f} s", flush=True)


def human(n: int) -> str:
    return f"{n / 1048576:.1f} MiB"


def main() -> int:
    global DOCKERFILE
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("binaries", nargs="*", metavar="BINARY", help=f"default: {' '.join(BINARIES)}")
    parser.add_argument("--no-build", action="store_true", help="package the binaries already built")
    parser.add_argument("--profile", default="release", help="the cargo profile to build with (default release)")
    parser.add_argument("--out", type=Path, help="default: <cargo target dir>/images")
    parser.add_argument("--prefix", default=DEFAULT_PREFIX,
                        help=f"image names are PREFIX/<binary> (default {DEFAULT_PREFIX})")
    parser.add_argument("--dockerfile", type=Path, default=DOCKERFILE, help="default: deploy/image/Dockerfile")
    parser.add_argument("--revision", help="org.opencontainers.image.revision (default: git rev-parse HEAD)")
    parser.add_argument("--source", help="org.opencontainers.image.source (default: Cargo.toml's repository, "
                        "else $GITHUB_SERVER_URL/$GITHUB_REPOSITORY)")
    opts = parser.parse_args()
    DOCKERFILE = opts.dockerfile
    binaries = opts.binaries or BINARIES
    try:
        for b in binaries:
            if b not in BINARIES:
                raise ImageError(f"{b}: not a controller binary ({', '.join(BINARIES)})")
        meta = cargo_metadata()
        packages = {p["name"]: p for p in meta["packages"]}
        triple = host_triple()
        arch = ARCH.get(triple.split("-")[0])
        if arch is None:
            raise ImageError(f"{triple}: no OCI architecture known for it ({', '.join(ARCH)})")
        profile_dir = {"dev": "debug", "test": "debug", "bench": "release"}.get(opts.profile, opts.profile)
        built = Path(meta["target_directory"]) / triple / profile_dir
        out = opts.out or Path(meta["target_directory"]) / "images"
        head, head_time = git_head()
        # Every stage is judged before anything is built.
        all_stages = stages(DOCKERFILE.read_text())
        images = {}
        for b in binaries:
            pkg = packages[b]
            prov = provenance(dict(os.environ), pkg["repository"] or "", head, head_time, opts.revision, opts.source)
            args = {"VERSION": pkg["version"], "LICENSES": pkg["license"] or "", "SOURCE": prov.source,
                    "REVISION": prov.revision, "CREATED": prov.created}
            image = evaluate(all_stages, b, args, built)
            runs = [host for files in image.layers for dest, host in files if dest == image.entrypoint[0]]
            if not runs:
                raise ImageError(f"stage {b}: ENTRYPOINT {image.entrypoint[0]} is no file a COPY puts there")
            images[b] = (pkg["version"], image, runs[-1], prov)
        if not opts.no_build:
            build(BINARIES, triple, opts.profile)
        out.mkdir(parents=True, exist_ok=True)
        tree = cargo_tree(triple)
        cargo_lock = (ROOT / "Cargo.lock").read_text()
        for b, (version, image, binary, prov) in images.items():
            require_static(binary)
            name = f"{opts.prefix}/{b}"
            archive, manifest_digest, unpacked = oci_archive(image, name, version, arch, prov.epoch)
            path = out / f"{b}-{version}.oci.tar"
            path.write_bytes(archive)
            files = [(dest, host.read_bytes()) for layer in image.layers for dest, host in layer]
            bom = sbom.document(b, version, name, prov.created, tree, cargo_lock, files)
            bom_path = out / f"{b}-{version}.cdx.json"
            sbom.write(bom_path, bom)
            print(f"{name}:{version}  SBOM: {len(bom['components'])} components  {bom_path}")
            print(f"{name}:{version}  {manifest_digest}  {human(len(archive))} archive, "
                  f"{human(unpacked)} unpacked  {path}")
    except ImageError as e:
        print(f"image: {e}", file=sys.stderr)
        return 1
    except subprocess.CalledProcessError as e:
        print(f"image: {' '.join(e.cmd)} failed (exit {e.returncode})", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
