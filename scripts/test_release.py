"""The release plan (scripts/release.py) against this repository's own files: what each version bump writes,
what it refuses, and the commands it runs in order. Pure: nothing is written, nothing is run.

python3 -m unittest discover -s scripts -p 'test_*.py'   (.ci/run runs it)
"""

from __future__ import annotations

import sys
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import release  # noqa: E402 (after the path)
from release import ReleaseError, plan  # noqa: E402

CHANGELOG = """# Changelog

Intro.

## [Unreleased]

### Added

- A thing.

## [0.1.0] - 2026-12-05

The first release.
"""


def repo_files(changelog: str = CHANGELOG) -> dict[str, str]:
    files = {path: (release.ROOT / path).read_text() for path in release.FILES}
    files[release.CHANGELOG] = changelog
    return files


class Versions(unittest.TestCase):
    def test_precedence_is_semver_s(self):
        order = ["0.1.0", "0.1.1", "0.2.0", "1.0.0-alpha", "1.0.0-alpha.1", "1.0.0-rc.1", "1.0.0-rc.2", "1.0.0",
                 "1.10.0"]
        keys = [release.parse_version(v) for v in order]
        self.assertEqual(keys, sorted(keys))

    def test_what_is_no_version_is_refused(self):
        for text in ["v1.0.0", "1.0", "01.0.0", "1.0.0+build", "", "1.0.0-"]:
            with self.subTest(text=text), self.assertRaises(ReleaseError):
                release.parse_version(text)


class Bump(unittest.TestCase):
    def setUp(self):
        self.files = repo_files()
        self.current = release.workspace_version(self.files[release.CARGO_TOML])
        self.p = plan("9.8.7", self.files, [], "2027-01-02", "target")

    def test_every_versioned_file_changes(self):
        self.assertEqual(list(self.p.edits), release.FILES)

    def test_cargo_toml_changes_only_the_workspace_version(self):
        before = self.files[release.CARGO_TOML].splitlines()
        after = self.p.edits[release.CARGO_TOML].splitlines()
        changed = [(a, b) for a, b in zip(before, after) if a != b]
        self.assertEqual(changed, [(f'version = "{self.current}"', 'version = "9.8.7"')])
        self.assertEqual(release.workspace_version(self.p.edits[release.CARGO_TOML]), "9.8.7")

    def test_cargo_lock_changes_each_workspace_member_once_and_nothing_else(self):
        members = release.workspace_members(self.files[release.CARGO_TOML])
        self.assertIn("cluster-controller", members)
        before = self.files[release.CARGO_LOCK].splitlines()
        after = self.p.edits[release.CARGO_LOCK].splitlines()
        self.assertEqual(len(before), len(after))
        changed = [i for i, (a, b) in enumerate(zip(before, after)) if a != b]
        self.assertEqual(len(changed), len(members))
        for i in changed:
            self.assertEqual(after[i], 'version = "9.8.7"')
            self.assertIn(before[i - 1].removeprefix('name = "').removesuffix('"'), members)

    def test_the_chart_and_the_dockerfile_name_the_new_version(self):
        chart = self.p.edits[release.CHART_YAML]
        self.assertIn("\nversion: 9.8.7\n", chart)
        self.assertIn('\nappVersion: "9.8.7"\n', chart)
        self.assertIn("\nARG VERSION=9.8.7\n", self.p.edits[release.DOCKERFILE])

    def test_the_goldens_and_install_md_keep_no_old_version_label(self):
        for g in release.GOLDENS:
            self.assertNotIn(f"app.kubernetes.io/version: {self.current}\n", self.p.edits[g])
            self.assertNotIn(f"helm.sh/chart: nats-operators-{self.current}\n", self.p.edits[g])
            self.assertIn("helm.sh/chart: nats-operators-9.8.7\n", self.p.edits[g])
        self.assertIn("cluster-controller:9.8.7", self.p.edits[release.INSTALL_MD])
        self.assertIn("cluster-controller-9.8.7.oci.tar", self.p.edits[release.INSTALL_MD])

    def test_the_changelog_s_unreleased_becomes_the_release_s_section(self):
        self.assertEqual(
            self.p.edits[release.CHANGELOG],
            CHANGELOG.replace("## [Unreleased]\n", "## [Unreleased]\n\n## [9.8.7] - 2027-01-02\n"),
        )

    def test_checks_then_commit_of_the_written_files_then_tag_then_package(self):
        self.assertEqual(self.p.checks, release.CHECKS)
        self.assertEqual(self.p.commit[:5], ["git", "commit", "-q", "-m", "release 9.8.7"])
        self.assertEqual(self.p.commit[self.p.commit.index("--") + 1 :], [*release.FILES, release.RELEASED_REVISIONS])
        self.assertEqual(self.p.record[:2], ["env", "RENDER_RELEASE=1"])
        self.assertEqual(self.p.tag[:5], ["git", "tag", "-a", "--cleanup=verbatim", "v9.8.7"])
        self.assertEqual(self.p.tag[-1], "COMMIT")
        self.assertTrue(self.p.tag[6].startswith("9.8.7\n\n### Added\n\n- A thing."), self.p.tag[6])
        self.assertEqual(self.p.package[-2:], ["-d", "target/chart"])

    def test_gate_runs_ci_run_as_the_checks(self):
        p = plan("9.8.7", self.files, [], "2027-01-02", "target", gate=True)
        self.assertEqual(p.checks, [["bash", ".ci/run"]])


class FirstRelease(unittest.TestCase):
    def test_the_version_the_tree_carries_untagged_changes_only_the_changelog(self):
        files = repo_files("# Changelog\n\n## [Unreleased]\n\nThe first release.\n")
        current = release.workspace_version(files[release.CARGO_TOML])
        p = plan(current, files, ["v0.0.1"], "2027-01-02", "target")
        self.assertEqual(list(p.edits), [release.CHANGELOG])
        self.assertEqual(p.commit[p.commit.index("--") + 1 :], [release.CHANGELOG, release.RELEASED_REVISIONS])


class Refusals(unittest.TestCase):
    def refuses(self, says: str, version: str, files: dict[str, str] | None = None, tags: list[str] | None = None):
        with self.assertRaises(ReleaseError) as e:
            plan(version, files or repo_files(), tags or [], "2027-01-02", "target")
        self.assertIn(says, str(e.exception))

    def test_a_tag_that_exists(self):
        self.refuses("tag v9.8.7 exists already", "9.8.7", tags=["v9.8.7"])

    def test_the_released_version_again(self):
        current = release.workspace_version(repo_files()[release.CARGO_TOML])
        self.refuses(f"tag v{current} exists already", current, tags=[f"v{current}"])

    def test_a_version_below_the_workspace_s(self):
        self.refuses("is below the workspace's version", "0.0.1")

    def test_an_empty_unreleased_section(self):
        empty = "# Changelog\n\n## [Unreleased]\n\n## [0.1.0] - 2026-12-05\n\nThe first release.\n"
        self.refuses("the Unreleased section is empty", "9.8.7", files=repo_files(empty))

    def test_a_changelog_without_unreleased(self):
        self.refuses("no `## [Unreleased]` section", "9.8.7", files=repo_files("# Changelog\n"))

    def test_no_version_at_all(self):
        self.refuses("is not a version", "latest")


if __name__ == "__main__":
    unittest.main()
