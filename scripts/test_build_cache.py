"""scripts/build_cache.py: which of target/debug's entries are the registry crates' (kept) and which the
workspace's own (left to be built), the key, which keys a save drops, and a save and restore on disk.

python3 -m unittest discover -s scripts -p 'test_*.py'   (.ci/run runs it)
"""

from __future__ import annotations

import os
import sys
import tempfile
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import build_cache  # noqa: E402

METADATA = {
    "packages": [
        {"name": "cluster-controller", "targets": [{"name": "cluster_controller"}, {"name": "cluster-controller"},
                                                   {"name": "api"}, {"name": "live"}]},
        {"name": "sim", "targets": [{"name": "sim"}, {"name": "build-script-build"}]},
    ]
}
WORKSPACE = build_cache.workspace_names(METADATA)


class Kept(unittest.TestCase):
    def test_registry_units_are_kept(self):
        for entry in ["libserde-0123456789abcdef.rlib", "libserde-0123456789abcdef.rmeta",
                      "serde-0123456789abcdef.d", "serde_derive-0123456789abcdef", "ring-0123456789abcdef",
                      "libtokio_macros-0123456789abcdef.so", "k8s-openapi-0123456789abcdef"]:
            self.assertTrue(build_cache.is_kept(entry, WORKSPACE), entry)

    def test_the_workspace_s_units_are_not(self):
        for entry in ["libcluster_controller-0123456789abcdef.rlib", "cluster_controller-0123456789abcdef",
                      "cluster-controller-0123456789abcdef", "api-0123456789abcdef", "live-0123456789abcdef.d",
                      "sim-0123456789abcdef", "libsim-0123456789abcdef.rmeta"]:
            self.assertFalse(build_cache.is_kept(entry, WORKSPACE), entry)

    def test_what_is_no_unit_is_not_kept(self):
        for entry in [".cargo-lock", "sim", "serde-0123.d", "serde-0123456789ABCDEF", "serde"]:
            self.assertFalse(build_cache.is_kept(entry, WORKSPACE), entry)

    def test_a_name_with_dashes_and_a_hash_like_part_splits_at_the_last_hash(self):
        self.assertTrue(build_cache.is_kept("tower-http-0123456789abcdef", WORKSPACE))
        self.assertFalse(build_cache.is_kept("cluster-controller-0123456789abcdef", {"cluster_controller"}))


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
    def test_a_save_then_a_restore_brings_back_the_registry_s_units_as_links(self):
        with tempfile.TemporaryDirectory() as tmp:
            tmp = Path(tmp)
            debug = tmp / "a" / "debug"
            (debug / "deps").mkdir(parents=True)
            (debug / "deps" / "libserde-0123456789abcdef.rlib").write_bytes(b"serde")
            (debug / "deps" / "sim-0123456789abcdef").write_bytes(b"sim")
            built = debug / "build" / "ring-0123456789abcdef" / "out" / "x.o"
            built.parent.mkdir(parents=True)
            built.write_bytes(b"o")
            root = tmp / "cache"
            self.assertIn("saved 2 files as key k", build_cache.save_tree(debug, root, "k", WORKSPACE))
            self.assertFalse((root / "k" / "debug" / "deps" / "sim-0123456789abcdef").exists())

            other = tmp / "b" / "debug"
            self.assertIn("restored 2 files of key k", build_cache.restore_tree(other, root, "k"))
            restored = other / "build" / "ring-0123456789abcdef" / "out" / "x.o"
            self.assertEqual(restored.read_bytes(), b"o")
            self.assertEqual(os.stat(restored).st_ino, os.stat(built).st_ino)
            self.assertEqual((other / "deps" / "libserde-0123456789abcdef.rlib").read_bytes(), b"serde")
            self.assertFalse((other / "deps" / "sim-0123456789abcdef").exists())

    def test_a_restore_leaves_a_built_target_alone_and_a_missing_key_is_a_cold_build(self):
        with tempfile.TemporaryDirectory() as tmp:
            tmp = Path(tmp)
            debug = tmp / "debug"
            (debug / "deps").mkdir(parents=True)
            (tmp / "cache" / "k" / "debug" / "deps").mkdir(parents=True)
            self.assertIn("left as it is", build_cache.restore_tree(debug, tmp / "cache", "k"))
            self.assertIn("a cold build", build_cache.restore_tree(debug, tmp / "cache", "other"))

    def test_a_second_save_replaces_the_first_and_drops_the_oldest_key(self):
        with tempfile.TemporaryDirectory() as tmp:
            tmp = Path(tmp)
            debug = tmp / "debug"
            (debug / "deps").mkdir(parents=True)
            (debug / "deps" / "libserde-0123456789abcdef.rlib").write_bytes(b"serde")
            root = tmp / "cache"
            for key in ("k1", "k2"):
                build_cache.save_tree(debug, root, key, WORKSPACE)
                os.utime(root / key, (1, 1) if key == "k1" else None)
            (debug / "deps" / "libserde-0123456789abcdef.rlib").unlink()
            (debug / "deps" / "libbytes-0123456789abcdef.rlib").write_bytes(b"bytes")
            self.assertIn("dropped k1", build_cache.save_tree(debug, root, "k3", WORKSPACE))
            self.assertEqual(sorted(p.name for p in root.iterdir()), ["k2", "k3"])
            build_cache.save_tree(debug, root, "k2", WORKSPACE)
            self.assertEqual(os.listdir(root / "k2" / "debug" / "deps"), ["libbytes-0123456789abcdef.rlib"])


if __name__ == "__main__":
    unittest.main()
