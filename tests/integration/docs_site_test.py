#!/usr/bin/python3
"""The documentation site: `mkdocs build --strict` passes (a broken link between pages fails it,
which the test shows on a copy with one), every page in docs/ is in mkdocs.yml's navigation, and
every relative link of the README names a file that exists, and the server's synopsis in
docs/operations.md names every flag its --help has.
Usage: docs_site_test.py SOURCE_DIR SERVER_BINARY"""
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

import yaml

ROOT = None
SERVER = None


def build(root, site):
    return subprocess.run(["mkdocs", "build", "--strict", "--site-dir", site],
                          cwd=root, capture_output=True, text=True, timeout=300)


def nav_pages(nav):
    for entry in nav:
        for value in entry.values() if isinstance(entry, dict) else [entry]:
            if isinstance(value, list):
                yield from nav_pages(value)
            else:
                yield value


class DocsSiteTest(unittest.TestCase):
    def setUp(self):
        self.work = tempfile.mkdtemp(prefix="docs-site-")
        self.addCleanup(shutil.rmtree, self.work)

    def test_the_site_builds_strictly(self):
        result = build(ROOT, os.path.join(self.work, "site"))
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)

    def test_a_broken_link_fails_the_build(self):
        copy = os.path.join(self.work, "copy")
        shutil.copytree(os.path.join(ROOT, "docs"), os.path.join(copy, "docs"))
        shutil.copy(os.path.join(ROOT, "mkdocs.yml"), copy)
        with open(os.path.join(copy, "docs", "index.md"), "a") as page:
            page.write("\nSee [a page that is not there](no-such-page.md).\n")
        result = build(copy, os.path.join(self.work, "site"))
        self.assertNotEqual(result.returncode, 0)
        self.assertIn("no-such-page.md", result.stdout + result.stderr)

    def test_every_page_is_in_the_navigation(self):
        with open(os.path.join(ROOT, "mkdocs.yml")) as config:
            nav = set(nav_pages(yaml.safe_load(config)["nav"]))
        pages = {name for name in os.listdir(os.path.join(ROOT, "docs")) if name.endswith(".md")}
        self.assertEqual(pages - nav, set(), "pages missing from mkdocs.yml's nav")
        self.assertEqual(nav - pages, set(), "nav entries without a page")

    def test_the_readmes_links_name_files_that_exist(self):
        with open(os.path.join(ROOT, "README.md")) as readme:
            links = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", readme.read())
        relative = [link for link in links if "://" not in link]
        self.assertTrue(relative)
        for link in relative:
            self.assertTrue(os.path.exists(os.path.join(ROOT, link)), link)


    def test_the_servers_synopsis_names_every_flag(self):
        help_text = subprocess.run([SERVER, "--help"], capture_output=True, text=True,
                                   check=True, timeout=60).stdout
        flags = set(re.findall(r"^  (--[a-z0-9-]+)", help_text, re.M))
        self.assertIn("--model-repository", flags)
        with open(os.path.join(ROOT, "docs", "operations.md")) as page:
            synopsis = page.read().split("## Flags", 1)[1].split("\n## ", 1)[0]
        self.assertEqual(flags - set(re.findall(r"--[a-z0-9-]+", synopsis)), set(),
                         "flags of vidclf-server --help missing from docs/operations.md")


if __name__ == "__main__":
    ROOT, SERVER = os.path.abspath(sys.argv[1]), sys.argv[2]
    unittest.main(argv=sys.argv[:1] + sys.argv[3:])
