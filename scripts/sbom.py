"""The CycloneDX SBOM of a controller image, for scripts/image.py (`just image`).

One JSON document (CycloneDX 1.5) per image, beside its archive: the image (a container), its two files (the
binary and the CA bundle, each with its sha256) and every crate compiled into the binary, each with its version,
licence, purl and Cargo.lock's sha256, and the dependency graph between them.

What is in the binary comes from `cargo tree -e normal,no-proc-macro --target <triple>` run over the three
binaries together, as scripts/image.py builds them (cargo unifies features over what it builds, so a binary
built alone could differ): normal dependencies only, for the target — no build scripts, proc macros or dev
dependencies, nothing of another platform. It is cargo's own resolution, read without another tool: an
SBOM generator (cargo-cyclonedx) would be one more binary to install and pin here, and its crate list comes
from `cargo metadata`, whose resolve is one graph for the whole workspace (every member's features, dev and
build dependencies in it) rather than the build of these three binaries.
"""

from __future__ import annotations

import hashlib
import json
import re
import uuid
from dataclasses import dataclass, field
from pathlib import Path

SPEC_VERSION = "1.5"
TREE_ARGS = ["-e", "normal,no-proc-macro", "--prefix", "depth", "-f", "{p}|{l}"]


@dataclass(frozen=True)
class Crate:
    name: str
    version: str
    path: str | None = None  # a workspace crate's directory; None for a registry crate


@dataclass
class Tree:
    """cargo tree's output as a graph: the roots and each crate's dependencies, with their licences."""

    roots: list[Crate] = field(default_factory=list)
    deps: dict[Crate, set[Crate]] = field(default_factory=dict)
    licenses: dict[Crate, str] = field(default_factory=dict)

    def closure(self, root: Crate) -> list[Crate]:
        """Every crate `root` depends on, directly or not, sorted; `root` not included."""
        seen: set[Crate] = set()
        todo = [root]
        while todo:
            for d in self.deps.get(todo.pop(), ()):
                if d not in seen:
                    seen.add(d)
                    todo.append(d)
        return sorted(seen, key=lambda c: (c.name, c.version))


LINE = re.compile(r"^(\d+)(\S+) v(\S+)(?: \(([^)]*)\))?\|(.*?)(?: \(\*\))?$")


def parse_tree(text: str) -> Tree:
    """`cargo tree --prefix depth -f '{p}|{l}'`: a crate a line, its depth first; ` (*)` marks a crate whose
    dependencies were shown before (cargo shows each crate's dependencies once, in its first place)."""
    tree = Tree()
    stack: list[Crate] = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        m = LINE.match(line)
        if not m:
            raise ValueError(f"cargo tree line {n}: {line!r} is not `<depth><name> v<version>|<licence>`")
        depth = int(m.group(1))
        path = m.group(4) if m.group(4) and m.group(4) != "proc-macro" else None
        crate = Crate(m.group(2), m.group(3), path)
        tree.licenses[crate] = m.group(5).strip()
        tree.deps.setdefault(crate, set())
        if depth == 0:
            tree.roots.append(crate)
        elif depth > len(stack):
            raise ValueError(f"cargo tree line {n}: depth {depth} under depth {len(stack) - 1}")
        else:
            tree.deps[stack[depth - 1]].add(crate)
        del stack[depth:]
        stack.append(crate)
    return tree


def lock_packages(cargo_lock: str) -> dict[tuple[str, str], dict[str, str]]:
    """Cargo.lock's packages by (name, version): their source and checksum, where it has them."""
    out = {}
    for block in re.split(r"^\[\[package\]\]\n", cargo_lock, flags=re.MULTILINE)[1:]:
        fields = dict(re.findall(r'^(name|version|source|checksum) = "([^"]*)"$', block, re.MULTILINE))
        out[(fields.get("name", ""), fields.get("version", ""))] = fields
    return out


def spdx(license_text: str) -> str:
    """A crate's licence as an SPDX expression: the old `A/B` form means `A OR B`."""
    return " OR ".join(p.strip() for p in license_text.split("/")) if "/" in license_text else license_text


def ref(c: Crate) -> str:
    return f"crate:{c.name}@{c.version}"


def component(c: Crate, lock: dict[tuple[str, str], dict[str, str]], license_text: str) -> dict:
    entry = lock.get((c.name, c.version), {})
    out: dict = {"type": "library", "bom-ref": ref(c), "name": c.name, "version": c.version}
    if license_text:
        out["licenses"] = [{"expression": spdx(license_text)}]
    source = entry.get("source", "")
    if source.startswith("registry+") or source.startswith("sparse+"):
        out["purl"] = f"pkg:cargo/{c.name}@{c.version}"
    if entry.get("checksum"):
        out["hashes"] = [{"alg": "SHA-256", "content": entry["checksum"]}]
    if c.path is not None:
        out["description"] = "a crate of this workspace"
    return out


def document(binary: str, version: str, image_name: str, created: str, tree: Tree, cargo_lock: str,
             files: list[tuple[str, bytes]]) -> dict:
    """The SBOM of the image `image_name:version` holding `binary` and `files` ((path in the image, bytes))."""
    roots = {r.name: r for r in tree.roots}
    if binary not in roots:
        raise ValueError(f"cargo tree shows no crate {binary} (its roots: {', '.join(sorted(roots))})")
    root = roots[binary]
    lock = lock_packages(cargo_lock)
    crates = tree.closure(root)
    image_ref = f"image:{image_name}:{version}"
    file_refs = []
    components = []
    for path, content in files:
        file_ref = f"file:{path}"
        file_refs.append(file_ref)
        components.append({
            "type": "application" if path == f"/{binary}" else "file",
            "bom-ref": file_ref,
            "name": path,
            "hashes": [{"alg": "SHA-256", "content": hashlib.sha256(content).hexdigest()}],
        } | ({"version": version} if path == f"/{binary}" else {}))
    for c in [root, *crates]:
        components.append(component(c, lock, tree.licenses.get(c, "")))
    binary_file = f"file:/{binary}"
    dependencies = [{"ref": image_ref, "dependsOn": file_refs}]
    if binary_file in file_refs:
        dependencies.append({"ref": binary_file, "dependsOn": [ref(root)]})
    for c in [root, *crates]:
        dependencies.append({"ref": ref(c), "dependsOn": sorted(ref(d) for d in tree.deps.get(c, ()))})
    body = {
        "bomFormat": "CycloneDX",
        "specVersion": SPEC_VERSION,
        "version": 1,
        "metadata": {
            "timestamp": created,
            "tools": {"components": [{"type": "application", "name": "scripts/image.py"}]},
            "component": {"type": "container", "bom-ref": image_ref, "name": image_name, "version": version},
        },
        "components": components,
        "dependencies": dependencies,
    }
    # The same inputs give the same document, its serial number included (a name-based UUID of its content).
    digest = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()
    return {"bomFormat": "CycloneDX", "specVersion": SPEC_VERSION,
            "serialNumber": f"urn:uuid:{uuid.uuid5(uuid.NAMESPACE_URL, digest)}"} | body


def write(path: Path, doc: dict) -> None:
    path.write_text(json.dumps(doc, indent=1, sort_keys=False) + "\n")
