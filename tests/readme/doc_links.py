#!/usr/bin/env python3
"""Checks that every relative link in README.md and docs/*.md leads somewhere.

Usage: doc_links.py REPOSITORY_ROOT

A link `[text](path)`, `[text](path#anchor)` or `[text](#anchor)` (images too) must name a file or
folder that exists in the repository, relative to the page that links it, and the anchor must be
one the target page has: a heading's GitHub slug (lower case, punctuation dropped, spaces to
hyphens, `-1`, `-2`, ... for repeats) or an `<a id="...">`/`<a name="...">`. Links with a scheme
(`https:`, `mailto:`) are not followed: the tests run offline. Text inside fenced code blocks and
inline code spans is not markdown and is skipped.

Exits 0 when every link resolves; prints each broken one (page:line) otherwise.
"""
import os
import re
import sys
import unicodedata

LINK = re.compile(r"!?\[(?:[^\]\[]|\[[^\]]*\])*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
HTML_ANCHOR = re.compile(r"<a\s+(?:id|name)=\"([^\"]+)\"")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
INLINE_CODE = re.compile(r"(`+)(?:(?!\1).)+?\1")


def prose_lines(text):
    """(line number, line) of the page outside fenced code blocks."""
    fence = None
    for number, line in enumerate(text.split("\n"), start=1):
        stripped = line.lstrip()
        if fence is None and stripped.startswith(("```", "~~~")):
            fence = stripped[:3]
            continue
        if fence is not None:
            if stripped.startswith(fence):
                fence = None
            continue
        yield number, line


def github_slug(heading):
    """The id GitHub gives a heading: what `#anchor` links must match."""
    text = re.sub(r"<[^>]+>", "", heading)  # inline HTML is not part of the id
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)  # a link counts by its text
    text = text.strip().lower()
    kept = []
    for ch in text:
        if ch in " -_" or ch.isalnum() or unicodedata.category(ch).startswith("M"):
            kept.append("-" if ch == " " else ch)
    return "".join(kept)


def anchors_of(path, cache={}):  # noqa: B006 (a per-run memo)
    """Every anchor a page offers."""
    if path not in cache:
        found, seen = set(), {}
        text = open(path, encoding="utf-8").read()
        for _, line in prose_lines(text):
            found.update(HTML_ANCHOR.findall(line))
            m = HEADING.match(line)
            if not m:
                continue
            slug = github_slug(m.group(2))
            repeat = seen.get(slug, 0)
            seen[slug] = repeat + 1
            found.add(slug if repeat == 0 else f"{slug}-{repeat}")
        cache[path] = found
    return cache[path]


def pages(root):
    out = [os.path.join(root, "README.md")]
    docs = os.path.join(root, "docs")
    out += sorted(os.path.join(docs, f) for f in os.listdir(docs) if f.endswith(".md"))
    return out


def broken_links(page, root):
    problems = []
    text = open(page, encoding="utf-8").read()
    where = os.path.relpath(page, root)
    for number, line in prose_lines(text):
        for target in LINK.findall(INLINE_CODE.sub("", line)):
            if re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", target):
                continue  # https:, mailto: ...: not checked offline
            path, _, anchor = target.partition("#")
            file = os.path.normpath(os.path.join(os.path.dirname(page), path)) if path else page
            if not os.path.exists(file):
                problems.append(f"{where}:{number}: {target}: no such file")
            elif not os.path.abspath(file).startswith(os.path.abspath(root) + os.sep):
                problems.append(f"{where}:{number}: {target}: outside the repository")
            elif anchor and (not file.endswith(".md") or anchor not in anchors_of(file)):
                problems.append(f"{where}:{number}: {target}: no anchor #{anchor} there")
    return problems


def main():
    root = os.path.abspath(sys.argv[1])
    checked = pages(root)
    problems = sum((broken_links(page, root) for page in checked), [])
    for p in problems:
        print("BROKEN:", p)
    print(f"{len(checked)} pages checked, {len(problems)} broken link(s)")
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
