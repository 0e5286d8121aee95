#!/usr/bin/env python3
"""Generate a realistic monorepo-shaped tree for the `@path` file-search benchmarks.

Usage: gen.py DIR [--files N] [--ignored M] [--seed S]

About N (default 100000) visible files under DIR, in the shapes big repositories have:
services and libraries several levels deep, web apps with components nested up to ten levels,
generated code sixteen levels deep, wide shallow folders (icons, fixtures, migrations), mixed extensions, and a `.gitignore`
that hides a large `node_modules/` (M files, default 40000) plus `build/` output, as a real
checkout does. The same seed always gives the same tree. Files are empty: walkers and matchers
only look at names. A `.git/` directory is created so every tool treats the tree as a checkout.
"""

import argparse
import os
import random
import sys

SYLLABLES = [
    "ab", "ac", "ad", "al", "an", "ar", "as", "at", "ba", "be", "bi", "bo", "ca", "ce", "ci",
    "co", "da", "de", "di", "do", "el", "em", "en", "er", "es", "fa", "fe", "fi", "fo", "ga",
    "ge", "go", "ha", "he", "hi", "ho", "in", "is", "it", "ka", "ke", "ki", "ko", "la", "le",
    "li", "lo", "ma", "me", "mi", "mo", "na", "ne", "ni", "no", "or", "pa", "pe", "pi", "po",
    "ra", "re", "ri", "ro", "sa", "se", "si", "so", "ta", "te", "ti", "to", "un", "ur", "va",
    "ve", "vi", "vo", "za", "ze",
]
WORDS = [
    "auth", "billing", "cache", "client", "config", "core", "data", "db", "events", "gateway",
    "handler", "http", "index", "internal", "io", "jobs", "kafka", "log", "main", "metrics",
    "model", "net", "notify", "orders", "parser", "payment", "proto", "queue", "render",
    "router", "schema", "search", "server", "session", "storage", "stream", "sync", "test",
    "token", "ui", "user", "util", "validate", "view", "worker", "api", "admin", "common",
]
EXTENSIONS = {
    "service": [".go", ".go", ".go", "_test.go", ".proto", ".yaml", ".md", ".sql"],
    "lib": [".rs", ".rs", ".rs", ".toml", ".md", ".py", ".py", ".c", ".h"],
    "web": [".ts", ".tsx", ".tsx", ".css", ".test.ts", ".json", ".svg", ".js"],
    "java": [".java", ".java", ".kt", ".xml", ".properties"],
    "docs": [".md", ".md", ".png", ".rst", ".txt"],
}


def word(rng):
    if rng.random() < 0.55:
        return rng.choice(WORDS)
    return "".join(rng.choice(SYLLABLES) for _ in range(rng.randint(2, 4)))


def name(rng, style):
    parts = [word(rng) for _ in range(rng.randint(1, 3))]
    if style == "web":
        return "".join(p.capitalize() for p in parts)
    if style == "java":
        return "".join(p.capitalize() for p in parts)
    return "_".join(parts)


class Tree:
    def __init__(self, root, rng):
        self.root = root
        self.rng = rng
        self.count = 0
        self.dirs = set()

    def file(self, relative):
        path = os.path.join(self.root, relative)
        parent = os.path.dirname(path)
        if parent not in self.dirs:
            os.makedirs(parent, exist_ok=True)
            self.dirs.add(parent)
        if not os.path.exists(path):
            open(path, "w").close()
            self.count += 1

    def files_in(self, directory, style, n):
        for _ in range(n):
            ext = self.rng.choice(EXTENSIONS[style])
            self.file(os.path.join(directory, name(self.rng, style) + ext))


def nested(rng, depth):
    return "/".join(word(rng) for _ in range(depth))


def generate(root, n_files, n_ignored, seed):
    rng = random.Random(seed)
    os.makedirs(os.path.join(root, ".git"), exist_ok=True)
    with open(os.path.join(root, ".gitignore"), "w") as f:
        f.write("node_modules/\nbuild/\n*.pyc\n.cache/\n")
    tree = Tree(root, rng)
    for top in ["README.md", "Makefile", "package.json", "Cargo.toml", "go.work", ".editorconfig"]:
        tree.file(top)
    tree.file(".github/workflows/ci.yml")
    tree.file(".github/workflows/release.yml")

    # Shares of the visible files, by region, and how each region grows: a step either opens
    # a new directory under an existing one (with probability `p_new`, down to `max_depth`)
    # or adds files to an existing one. About eight files per directory overall, as in large
    # real repositories (Linux has about 16, Chromium about 10).
    regions = [
        # (root, share, style, p_new, max_depth, files per step)
        ("services", 0.30, "service", 0.55, 6, (2, 12)),
        ("libs", 0.22, "lib", 0.45, 5, (2, 12)),
        ("apps/web/src", 0.14, "web", 0.60, 10, (1, 8)),
        ("apps/admin/src", 0.08, "web", 0.60, 10, (1, 8)),
        ("platform/src/main/java/com/example", 0.10, "java", 0.5, 6, (2, 10)),
        ("docs", 0.05, "docs", 0.4, 3, (2, 10)),
        ("gen", 0.03, "lib", 0.9, 16, (1, 4)),
    ]
    for region, share, style, p_new, max_depth, (low, high) in regions:
        dirs = [(region, 0)]
        made = 0
        while made < n_files * share:
            parent, depth = rng.choice(dirs)
            if depth < max_depth and (rng.random() < p_new or len(dirs) == 1):
                child = (f"{parent}/{word(rng)}", depth + 1)
                dirs.append(child)
                parent = child[0]
            n = rng.randint(low, high)
            tree.files_in(parent, style, n)
            made += n
    # Wide, shallow folders: thousands of files side by side.
    per_wide = max(1, int(n_files * 0.08) // 4)
    for directory, ext in [
        ("assets/icons", ".svg"),
        ("db/migrations", ".sql"),
        ("testdata/fixtures", ".json"),
        ("locales", ".json"),
    ]:
        for i in range(per_wide):
            tree.file(f"{directory}/{i:05d}_{name(rng, 'lib')}{ext}")
    # Top up to the requested count with files in existing service and lib directories.
    existing = sorted(d for d in tree.dirs if "/services/" in d or "/libs/" in d)
    existing = existing or sorted(tree.dirs)
    while tree.count < n_files:
        directory = os.path.relpath(rng.choice(existing), root)
        tree.files_in(directory, "lib", 1)

    # Ignored: a large node_modules and a build folder.
    visible = tree.count
    ignored = Tree(root, rng)
    while ignored.count < n_ignored * 0.9:
        package = f"node_modules/{'@' + word(rng) + '/' if rng.random() < 0.2 else ''}{name(rng, 'lib')}"
        for _ in range(rng.randint(1, 4)):
            ignored.files_in(f"{package}/{nested(rng, rng.randint(0, 3))}".rstrip("/"), "web", rng.randint(3, 20))
    while ignored.count < n_ignored:
        ignored.files_in(f"build/{nested(rng, rng.randint(1, 3))}", "lib", rng.randint(5, 30))
    return visible, ignored.count


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dir")
    parser.add_argument("--files", type=int, default=100_000)
    parser.add_argument("--ignored", type=int, default=40_000)
    parser.add_argument("--seed", type=int, default=5)
    args = parser.parse_args()
    if os.path.exists(args.dir) and os.listdir(args.dir):
        sys.exit(f"{args.dir} exists and is not empty; remove it or pick another directory")
    visible, ignored = generate(args.dir, args.files, args.ignored, args.seed)
    print(f"{args.dir}: {visible} visible files, {ignored} ignored files")


if __name__ == "__main__":
    main()
