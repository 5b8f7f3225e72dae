#!/usr/bin/env python3
"""Checks the relative links of the documentation: README.md and every
Markdown file under docs/ (the user guide's source). A link to a file must
name one that exists; a link to a heading (`page.md#heading` or `#heading`)
must name a heading of that page, with the anchors GitHub and mdBook give
headings (lower case, punctuation dropped, spaces as hyphens). Links with a
scheme (https:, mailto:) are not followed: the machines that run this have
no general network access.

Usage: scripts/check-doc-links.py [REPO_ROOT]; exits 1 listing every broken
link.
"""

import re
import sys
from pathlib import Path

LINK = re.compile(r"(?<!!)\[(?:[^\[\]]|\[[^\]]*\])*\]\(([^()\s]+(?:\([^()]*\))?)(?:\s+\"[^\"]*\")?\)")
IMAGE = re.compile(r"!\[[^\]]*\]\(([^()\s]+)\)")
REFDEF = re.compile(r"^\s*\[[^\]]+\]:\s*(\S+)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
INLINE_CODE = re.compile(r"(`+)(?:(?!\1).)+?\1")


def prose_lines(text, keep_code_spans=False):
    """The lines outside fenced code blocks, with inline code blanked
    (kept with `keep_code_spans`)."""
    fence = None
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.lstrip()
        marker = stripped[:3]
        if fence is None and marker in ("```", "~~~"):
            fence = marker
            continue
        if fence is not None:
            if stripped.startswith(fence):
                fence = None
            continue
        if keep_code_spans:
            yield number, line
        else:
            yield number, INLINE_CODE.sub(lambda m: " " * len(m.group(0)), line)


def slug(heading):
    text = re.sub(r"`([^`]*)`", r"\1", heading)
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = text.strip().lower()
    text = "".join(c for c in text if c.isalnum() or c in " -_")
    return text.replace(" ", "-")


def anchors(path, cache={}):
    if path not in cache:
        seen = {}
        found = set()
        for _, line in prose_lines(path.read_text(encoding="utf-8"), keep_code_spans=True):
            m = HEADING.match(line)
            if not m:
                continue
            base = slug(m.group(2))
            n = seen.get(base, 0)
            seen[base] = n + 1
            found.add(base if n == 0 else f"{base}-{n}")
        # Explicit anchors: <a name="x"></a> / id="x".
        for m in re.finditer(r"""(?:name|id)=["']([^"']+)["']""", path.read_text(encoding="utf-8")):
            found.add(m.group(1))
        cache[path] = found
    return cache[path]


def check(root):
    files = [root / "README.md", *sorted((root / "docs").rglob("*.md"))]
    broken = []
    checked = 0
    for file in files:
        text = file.read_text(encoding="utf-8")
        for number, line in prose_lines(text):
            targets = [m.group(1) for m in LINK.finditer(line)]
            targets += [m.group(1) for m in IMAGE.finditer(line)]
            m = REFDEF.match(line)
            if m:
                targets.append(m.group(1))
            for target in targets:
                target = target.strip("<>")
                if re.match(r"^[a-z][a-z0-9+.-]*:", target):
                    continue
                checked += 1
                path_part, _, anchor = target.partition("#")
                dest = file if not path_part else (file.parent / path_part).resolve()
                where = f"{file.relative_to(root)}:{number}: {target}"
                if not dest.exists():
                    broken.append(f"{where}: no such file")
                    continue
                if anchor and dest.suffix == ".md" and anchor not in anchors(dest):
                    broken.append(f"{where}: no heading with anchor #{anchor}")
    return checked, broken


def main():
    root = Path(sys.argv[1] if len(sys.argv) > 1 else ".").resolve()
    checked, broken = check(root)
    for line in broken:
        print(line, file=sys.stderr)
    print(f"check-doc-links: {checked} relative links checked, {len(broken)} broken", file=sys.stderr)
    sys.exit(1 if broken else 0)


if __name__ == "__main__":
    main()
