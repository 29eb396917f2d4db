"""scripts/build_cache.py: which of target/debug's entries are units (kept) and which are copied rather than linked,
the sources' record, the key, which keys a save drops, a save and restore on disk, and one with cargo itself.

python3 -m unittest discover -s scripts -p 'test_*.py'   (.ci/run runs it)
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import build_cache  # noqa: E402

class Kept(unittest.TestCase):
    def test_every_unit_is_kept_the_registry_s_and_the_workspace_s(self):
        for entry in ["libserde-0123456789abcdef.rlib", "libserde-0123456789abcdef.rmeta",
                      "serde-0123456789abcdef.d", "serde_derive-0123456789abcdef", "ring-0123456789abcdef",
                      "libtokio_macros-0123456789abcdef.so", "k8s-openapi-0123456789abcdef",
                      "libcluster_controller-0123456789abcdef.rlib", "cluster-controller-0123456789abcdef",
                      "api-0123456789abcdef", "live-0123456789abcdef.d", "libsim-0123456789abcdef.rmeta"]:
            self.assertTrue(build_cache.is_unit(entry), entry)

    def test_what_is_no_unit_is_not_kept(self):
        for entry in [".cargo-lock", "sim", "serde-0123.d", "serde-0123456789ABCDEF", "serde"]:
            self.assertFalse(build_cache.is_unit(entry), entry)

    def test_what_cargo_writes_in_place_is_copied_the_rest_linked(self):
        cases = {
            ".fingerprint/sim-0123456789abcdef/lib-sim": True,
            ".fingerprint/sim-0123456789abcdef/invoked.timestamp": True,
            "deps/sim-0123456789abcdef.d": True,
            "build/ring-0123456789abcdef/output": True,
            "build/ring-0123456789abcdef/out/x.o": True,
            "deps/sim-0123456789abcdef": False,
            "deps/libsim-0123456789abcdef.rlib": False,
            "deps/libsim-0123456789abcdef.rmeta": False,
            "deps/libtokio_macros-0123456789abcdef.so": False,
            "examples/node_up-0123456789abcdef": False,
            "examples/node_up-0123456789abcdef.d": True,
        }
        for rel, want in cases.items():
            self.assertEqual(build_cache.written_in_place(Path(rel)), want, rel)


class Sources(unittest.TestCase):
    def test_ls_files_gives_each_path_its_blob_and_no_submodule(self):
        out = "\x00".join(["100644 aaaa 0\tsrc/lib.rs", "100755 bbbb 0\tscripts/x y.sh", "160000 cccc 0\tvendor/sub",
                           "120000 dddd 0\tlink", ""])
        self.assertEqual(build_cache.parse_ls_files(out),
                         {"src/lib.rs": "aaaa", "scripts/x y.sh": "bbbb", "link": "dddd"})

    def test_status_names_changed_paths_and_skips_a_rename_s_source(self):
        out = " M src/lib.rs\0M  Cargo.toml\0R  new.rs\0old.rs\0 D gone.rs\0"
        self.assertEqual(build_cache.parse_changed(out), {"src/lib.rs", "Cargo.toml", "new.rs", "gone.rs"})
        self.assertEqual(build_cache.parse_changed(""), set())

    def test_only_a_file_with_the_recorded_blob_and_unchanged_gets_its_time_back(self):
        recorded = {"same.rs": ["aaaa", 100], "edited.rs": ["bbbb", 200], "dirty.rs": ["cccc", 300],
                    "gone.rs": ["dddd", 400], "odd.rs": ["eeee"]}
        blobs = {"same.rs": "aaaa", "edited.rs": "ffff", "dirty.rs": "cccc", "new.rs": "9999", "odd.rs": "eeee"}
        self.assertEqual(build_cache.stamps_to_restore(recorded, blobs, {"dirty.rs"}), {"same.rs": 100})


def dep_info(*paths: bytes) -> bytes:
    """A dep-info fingerprint file as cargo 1.95 writes it: a header, the count, then each path's type, its length
    (u32, little-endian), its bytes and a no-checksum flag; then no env."""
    body = b"".join(b"\x00" + len(p).to_bytes(4, "little") + p + b"\x00" for p in paths)
    return b"\x01\x00\x00\x00\xff\x01" + len(paths).to_bytes(4, "little") + body + b"\x00\x00\x00\x00"


class Rebase(unittest.TestCase):
    def test_a_path_under_the_old_checkout_moves_with_its_length(self):
        data = dep_info(b"src/lib.rs", b"/work/a/c/Cargo.toml", b"src/x.rs")
        want = dep_info(b"src/lib.rs", b"/work/longer/c/Cargo.toml", b"src/x.rs")
        self.assertEqual(build_cache.rebase_dep_info(data, "/work/a/c", "/work/longer/c"), want)
        self.assertEqual(build_cache.rebase_dep_info(want, "/work/longer/c/", "/work/a/c"), data)

    def test_what_is_not_under_it_or_not_a_length_prefixed_path_is_left(self):
        cases = [
            dep_info(b"src/lib.rs", b"/home/u/.cargo/registry/x.rs"),
            dep_info(b"/work/a/cc/Cargo.toml"),  # another directory that starts alike
            b"garbage /work/a/c/Cargo.toml",  # no length before it
            b"\xff\xff\xff\x7f/work/a/c/x",  # a length past the end
            b"",
        ]
        for data in cases:
            self.assertEqual(build_cache.rebase_dep_info(data, "/work/a/c", "/b"), data, data)


class Keys(unittest.TestCase):
    def test_the_key_changes_with_the_compiler_and_the_lockfile(self):
        k = build_cache.cache_key("rustc 1.91.0", b"lock")
        self.assertEqual(k, build_cache.cache_key("rustc 1.91.0", b"lock"))
        self.assertNotEqual(k, build_cache.cache_key("rustc 1.92.0", b"lock"))
        self.assertNotEqual(k, build_cache.cache_key("rustc 1.91.0", b"lock2"))

    def test_a_save_keeps_its_own_key_and_the_newest_other(self):
        self.assertEqual(build_cache.stale_keys(["a", "b", "c"], "c"), ["a"])
        self.assertEqual(build_cache.stale_keys(["a", "b", "c"], "a"), ["b"])
        self.assertEqual(build_cache.stale_keys(["c"], "c"), [])
        self.assertEqual(build_cache.stale_keys(["a", "c"], "c"), [])
        self.assertEqual(build_cache.stale_keys(["a", "b", "c", "d"], "d", keep=1), ["a", "b", "c"])


class OnDisk(unittest.TestCase):
    def test_a_save_then_a_restore_links_the_outputs_and_copies_what_is_written_in_place(self):
        with tempfile.TemporaryDirectory() as tmp:
            tmp = Path(tmp)
            debug = tmp / "a" / "debug"
            (debug / "deps").mkdir(parents=True)
            (debug / "deps" / "libserde-0123456789abcdef.rlib").write_bytes(b"serde")
            (debug / "deps" / "sim-0123456789abcdef").write_bytes(b"sim")
            (debug / "deps" / "sim-0123456789abcdef.d").write_bytes(b"dep-info")
            (debug / "deps" / "not-a-unit").write_bytes(b"x")
            fp = debug / ".fingerprint" / "sim-0123456789abcdef" / "bin-sim"
            fp.parent.mkdir(parents=True)
            fp.write_bytes(b"fingerprint")
            built = debug / "build" / "ring-0123456789abcdef" / "out" / "x.o"
            built.parent.mkdir(parents=True)
            built.write_bytes(b"o")
            root = tmp / "cache"
            said = build_cache.save_tree(debug, root, "k", {"root": "/a", "files": {"src/lib.rs": ["aaaa", 1]}})
            self.assertIn("saved 5 files and 1 sources' times as key k", said)
            self.assertFalse((root / "k" / "debug" / "deps" / "not-a-unit").exists())
            cached_fp = root / "k" / "debug" / ".fingerprint" / "sim-0123456789abcdef" / "bin-sim"
            self.assertNotEqual(os.stat(cached_fp).st_ino, os.stat(fp).st_ino)
            self.assertEqual(os.stat(root / "k" / "debug" / "deps" / "sim-0123456789abcdef").st_ino,
                             os.stat(debug / "deps" / "sim-0123456789abcdef").st_ino)

            other = tmp / "b" / "debug"
            restored, said = build_cache.restore_tree(other, root, "k")
            self.assertTrue(restored)
            self.assertIn("restored 5 files of key k", said)
            self.assertEqual((other / "build" / "ring-0123456789abcdef" / "out" / "x.o").read_bytes(), b"o")
            self.assertEqual(os.stat(other / "deps" / "sim-0123456789abcdef").st_ino,
                             os.stat(debug / "deps" / "sim-0123456789abcdef").st_ino)
            # A rebuild in the restored clone writes its fingerprint and dep-info in place: the cache keeps its own.
            (other / ".fingerprint" / "sim-0123456789abcdef" / "bin-sim").write_bytes(b"rebuilt")
            (other / "deps" / "sim-0123456789abcdef.d").write_bytes(b"rebuilt")
            self.assertEqual(cached_fp.read_bytes(), b"fingerprint")
            self.assertEqual((root / "k" / "debug" / "deps" / "sim-0123456789abcdef.d").read_bytes(), b"dep-info")

    def test_a_restore_leaves_a_built_target_alone_and_a_missing_key_is_a_cold_build(self):
        with tempfile.TemporaryDirectory() as tmp:
            tmp = Path(tmp)
            debug = tmp / "debug"
            (debug / "deps").mkdir(parents=True)
            (tmp / "cache" / "k" / "debug" / "deps").mkdir(parents=True)
            restored, said = build_cache.restore_tree(debug, tmp / "cache", "k")
            self.assertFalse(restored)
            self.assertIn("left as it is", said)
            restored, said = build_cache.restore_tree(debug, tmp / "cache", "other")
            self.assertFalse(restored)
            self.assertIn("a cold build", said)

    def test_a_second_save_replaces_the_first_and_drops_the_oldest_key(self):
        with tempfile.TemporaryDirectory() as tmp:
            tmp = Path(tmp)
            debug = tmp / "debug"
            (debug / "deps").mkdir(parents=True)
            (debug / "deps" / "libserde-0123456789abcdef.rlib").write_bytes(b"serde")
            root = tmp / "cache"
            for key in ("k1", "k2"):
                build_cache.save_tree(debug, root, key)
                os.utime(root / key, (1, 1) if key == "k1" else None)
            (debug / "deps" / "libserde-0123456789abcdef.rlib").unlink()
            (debug / "deps" / "libbytes-0123456789abcdef.rlib").write_bytes(b"bytes")
            self.assertIn("dropped k1", build_cache.save_tree(debug, root, "k3"))
            self.assertEqual(sorted(p.name for p in root.iterdir()), ["k2", "k3"])
            build_cache.save_tree(debug, root, "k2")
            self.assertEqual(os.listdir(root / "k2" / "debug" / "deps"), ["libbytes-0123456789abcdef.rlib"])


@unittest.skipUnless(shutil.which("cargo") and shutil.which("git"), "needs cargo and git")
class WithCargo(unittest.TestCase):
    """A workspace of two crates built in one clone, its build kept, and a second clone of a later commit: cargo
    finds fresh the crate whose sources did not change and builds the one whose did, and the build of the second
    clone leaves the cache as it was."""

    clippy = subprocess.run(["cargo", "clippy", "--version"], capture_output=True).returncode == 0

    def cargo(self, repo: Path, target: Path, *args: str) -> str:
        env = {k: v for k, v in os.environ.items() if not k.startswith("CARGO_TARGET")}
        env.update(CARGO_TARGET_DIR=str(target), CARGO_INCREMENTAL="0", CARGO_TERM_COLOR="never")
        done = subprocess.run(["cargo", *args, "--offline", "-v"], cwd=repo, env=env, capture_output=True, text=True)
        self.assertEqual(done.returncode, 0, done.stderr)
        return done.stderr

    def git(self, repo: Path, *args: str) -> None:
        subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=repo, check=True,
                       capture_output=True)

    def test_only_what_changed_is_built_in_the_next_clone(self):
        with tempfile.TemporaryDirectory() as tmp:
            tmp = Path(tmp)
            origin = tmp / "origin"
            for crate, body in (("low", "pub fn n() -> u32 { 1 }\n"), ("top", "pub fn m() -> u32 { low::n() }\n")):
                (origin / crate / "src").mkdir(parents=True)
                deps = '[dependencies]\nlow = { path = "../low" }\n' if crate == "top" else ""
                (origin / crate / "Cargo.toml").write_text(
                    f'[package]\nname = "{crate}"\nversion = "0.1.0"\nedition = "2021"\n{deps}')
                (origin / crate / "src" / "lib.rs").write_text(body)
            (origin / "Cargo.toml").write_text('[workspace]\nmembers = ["low", "top"]\nresolver = "2"\n')
            self.git(origin, "init", "-q")
            self.cargo(origin, tmp / "scratch", "generate-lockfile")
            self.git(origin, "add", "-A")
            self.git(origin, "commit", "-q", "-m", "one")
            root = tmp / "cache"

            first = tmp / "first"
            self.git(tmp, "clone", "-q", str(origin), str(first))
            self.assertIn("no cache", build_cache.restore(first, first / "target", root))
            self.assertIn("Compiling top", self.cargo(first, first / "target", "build"))
            if self.clippy:
                self.assertIn("Checking top", self.cargo(first, first / "target", "clippy"))
            self.assertIn("saved", build_cache.save(first, first / "target", root))
            shutil.rmtree(first)  # nothing of it may be needed by the next

            (origin / "top" / "src" / "lib.rs").write_text("pub fn m() -> u32 { low::n() + 1 }\n")
            self.git(origin, "commit", "-q", "-am", "two")
            second = tmp / "second"
            self.git(tmp, "clone", "-q", str(origin), str(second))
            said = build_cache.restore(second, second / "target", root)
            self.assertIn("restored", said)
            self.assertIn("1 changed or new", said)
            cached = {p: p.read_bytes() for p in (root).rglob("*") if p.is_file()}
            out = self.cargo(second, second / "target", "build")
            self.assertIn("Fresh low", out)
            self.assertIn("Compiling top", out)
            if self.clippy:
                out = self.cargo(second, second / "target", "clippy")
                self.assertIn("Fresh low", out)
                self.assertIn("Checking top", out)
            self.assertEqual({p: p.read_bytes() for p in root.rglob("*") if p.is_file()}, cached)


if __name__ == "__main__":
    unittest.main()
