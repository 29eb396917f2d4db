"""scripts/image.py's provenance and annotations and scripts/sbom.py's reading of `cargo tree`, as pure
functions: what a build is labelled with where, and which crates an SBOM lists. The archive itself is tested
by e2e's image tests (e2e/tests/image).

python3 -m unittest discover -s scripts -p 'test_*.py'   (.ci/run runs it)
"""

from __future__ import annotations

import sys
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import image  # noqa: E402
import sbom  # noqa: E402

HEAD = "a" * 40


class Provenance(unittest.TestCase):
    def test_a_checkout_is_labelled_with_its_head_and_the_commit_s_time(self):
        p = image.provenance({}, "", HEAD, "1764892800")
        self.assertEqual((p.revision, p.source, p.created), (HEAD, "", "2025-12-05T00:00:00Z"))

    def test_source_date_epoch_wins_over_the_commit_s_time(self):
        self.assertEqual(image.provenance({"SOURCE_DATE_EPOCH": "0"}, "", HEAD, "1764892800").created,
                         "1970-01-01T00:00:00Z")

    def test_the_command_line_wins(self):
        p = image.provenance({}, "https://x.invalid/a", HEAD, "1", revision="r", source="s")
        self.assertEqual((p.revision, p.source), ("r", "s"))

    def test_source_is_cargo_s_repository_else_the_workflow_s(self):
        github = {"GITHUB_SERVER_URL": "https://github.example", "GITHUB_REPOSITORY": "o/r"}
        self.assertEqual(image.provenance(github, "", HEAD, "1").source, "https://github.example/o/r")
        self.assertEqual(image.provenance(github, "https://x.invalid/a", HEAD, "1").source, "https://x.invalid/a")

    def test_outside_a_checkout_no_revision_and_the_epoch(self):
        p = image.provenance({}, "", None, None)
        self.assertEqual((p.revision, p.epoch), ("", 0))

    def test_a_source_date_epoch_that_is_no_time_is_refused(self):
        with self.assertRaises(image.ImageError):
            image.provenance({"SOURCE_DATE_EPOCH": "yesterday"}, "", HEAD, "1")

    def test_annotations_are_the_oci_labels_with_a_value(self):
        labels = {"org.opencontainers.image.version": "1.0.0", "org.opencontainers.image.source": "",
                  "com.example.other": "x"}
        self.assertEqual(image.annotations(labels), {"org.opencontainers.image.version": "1.0.0"})


TREE = """\
0app v0.1.0 (/w/app)|Apache-2.0
1kit v0.1.0 (/w/kit)|Apache-2.0
2serde v1.0.0|MIT OR Apache-2.0
1tokio v1.2.3|MIT
2bytes v1.0.0|MIT
1serde v1.0.0|MIT OR Apache-2.0 (*)

0other v0.1.0 (/w/other)|Apache-2.0
1fnv v1.0.7|Apache-2.0 / MIT
1tokio v1.2.3|MIT (*)
"""

LOCK = """\
version = 4

[[package]]
name = "app"
version = "0.1.0"

[[package]]
name = "bytes"
version = "1.0.0"
source = "registry+https://index.invalid"
checksum = "bb"

[[package]]
name = "tokio"
version = "1.2.3"
source = "registry+https://index.invalid"
checksum = "tt"
"""


class BuildEnv(unittest.TestCase):
    def test_the_build_is_given_neither_cargo_s_variables_for_a_test_nor_the_image_s_date(self):
        env = image.build_env({"PATH": "/bin", "CARGO_PKG_NAME": "e2e", "NEXTEST_RUN_ID": "1",
                               "SOURCE_DATE_EPOCH": "1764892800", "CARGO_INCREMENTAL": "0"})
        self.assertEqual(env, {"PATH": "/bin", "CARGO_INCREMENTAL": "0", "RUSTFLAGS": image.RUSTFLAGS})


class Sbom(unittest.TestCase):
    def setUp(self):
        self.tree = sbom.parse_tree(TREE)

    def test_the_roots_are_the_binaries(self):
        self.assertEqual([r.name for r in self.tree.roots], ["app", "other"])

    def test_a_crate_shown_before_keeps_the_dependencies_shown_there(self):
        other = self.tree.roots[1]
        self.assertEqual([c.name for c in self.tree.closure(other)], ["bytes", "fnv", "tokio"])
        app = self.tree.roots[0]
        self.assertEqual([c.name for c in self.tree.closure(app)], ["bytes", "kit", "serde", "tokio"])

    def test_a_line_that_is_not_cargo_tree_s_is_refused(self):
        with self.assertRaises(ValueError):
            sbom.parse_tree("app 0.1.0\n")
        with self.assertRaises(ValueError):
            sbom.parse_tree("0app v0.1.0|MIT\n2deep v1.0.0|MIT\n")

    def test_old_slash_licences_become_spdx(self):
        self.assertEqual(sbom.spdx("Apache-2.0 / MIT"), "Apache-2.0 OR MIT")
        self.assertEqual(sbom.spdx("MIT OR Apache-2.0"), "MIT OR Apache-2.0")

    def test_the_document(self):
        doc = sbom.document("other", "0.1.0", "localhost/x/other", "2025-12-05T00:00:00Z", self.tree, LOCK,
                            [("/etc/ca.crt", b"ca"), ("/other", b"elf")])
        self.assertEqual(doc["metadata"]["component"]["bom-ref"], "image:localhost/x/other:0.1.0")
        by_name = {c["name"]: c for c in doc["components"]}
        self.assertEqual(list(by_name), ["/etc/ca.crt", "/other", "other", "bytes", "fnv", "tokio"])
        self.assertEqual(by_name["/other"]["type"], "application")
        self.assertEqual(by_name["tokio"]["purl"], "pkg:cargo/tokio@1.2.3")
        self.assertEqual(by_name["tokio"]["hashes"], [{"alg": "SHA-256", "content": "tt"}])
        self.assertEqual(by_name["fnv"]["licenses"], [{"expression": "Apache-2.0 OR MIT"}])
        self.assertNotIn("purl", by_name["other"])  # a workspace crate, on no registry
        deps = {d["ref"]: d["dependsOn"] for d in doc["dependencies"]}
        self.assertEqual(deps["image:localhost/x/other:0.1.0"], ["file:/etc/ca.crt", "file:/other"])
        self.assertEqual(deps["file:/other"], ["crate:other@0.1.0"])
        self.assertEqual(deps["crate:other@0.1.0"], ["crate:fnv@1.0.7", "crate:tokio@1.2.3"])
        again = sbom.document("other", "0.1.0", "localhost/x/other", "2025-12-05T00:00:00Z", self.tree, LOCK,
                              [("/etc/ca.crt", b"ca"), ("/other", b"elf")])
        self.assertEqual(doc, again)

    def test_a_binary_cargo_tree_does_not_show_is_refused(self):
        with self.assertRaises(ValueError):
            sbom.document("absent", "0.1.0", "x", "t", self.tree, LOCK, [])


if __name__ == "__main__":
    unittest.main()
