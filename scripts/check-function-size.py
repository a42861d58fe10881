#!/usr/bin/env python3
"""Fails when a function in src/, include/ or tools/ is longer than 60 lines.

A function's length is counted from the first line of its definition (where its signature
starts) to its closing brace, both included; a lambda or local class counts toward the function
it is written in. This is a reading of the source, not a compiler's: comments, string and
character literals and preprocessor lines are removed first, then every brace at namespace or
class scope whose heading looks like a function (a parameter list, then qualifiers, a trailing
return type or a constructor's initializers) opens a function. clang-tidy's
readability-function-size would parse the code properly, but it takes minutes per build on two
cores, and this runs in the quick test tier in about a second.

Usage: scripts/check-function-size.py [--max N] [--all] [FILE...]
  Prints each function over the limit and exits 1 if there is one (default: every tracked .h
  and .cc file under src/, include/ and tools/). --all also prints every function's length.
"""

import argparse
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_DIRS = ["src", "include", "tools"]
QUALIFIERS = re.compile(
    r"(\s*(const|noexcept(\s*\([^()]*\))?|override|final|mutable|&&|&|volatile|"
    r"\[\[[^\]]*\]\]|try))*\s*$"
)
NOT_FUNCTIONS = re.compile(r"^\s*(namespace|class|struct|union|enum|extern)\b|=")


def blank_out(text):
    """The text with comments, literals and preprocessor lines replaced by spaces (newlines
    kept, so line numbers stay)."""
    out = []
    i, n = 0, len(text)
    line_start = True
    while i < n:
        c = text[i]
        if line_start and c == "#":
            # A preprocessor line, with its continuations.
            while i < n and text[i] != "\n":
                if text[i] == "\\" and i + 1 < n and text[i + 1] == "\n":
                    out.append(" \n")
                    i += 2
                    continue
                out.append(" ")
                i += 1
            continue
        if c == "\n":
            line_start = True
            out.append(c)
            i += 1
            continue
        if not c.isspace():
            line_start = False
        if text.startswith("//", i):
            while i < n and text[i] != "\n":
                out.append(" ")
                i += 1
            continue
        if text.startswith("/*", i):
            end = text.find("*/", i + 2)
            end = n if end < 0 else end + 2
            out.append(re.sub(r"[^\n]", " ", text[i:end]))
            i = end
            continue
        raw = re.match(r'(u8|u|U|L)?R"([^(\s]*)\(', text[i:i + 20])
        if raw and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            close = ")" + raw.group(2) + '"'
            end = text.find(close, i + raw.end())
            end = n if end < 0 else end + len(close)
            out.append('""' + re.sub(r"[^\n]", " ", text[i + 2:end]))
            i = end
            continue
        if c in "\"'":
            if c == "'" and i > 0 and text[i - 1].isalnum():
                out.append(c)  # a digit separator: 1'000'000
                i += 1
                continue
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            out.append(c + " " * (j - i - 1) + c)
            i = j + 1
            continue
        out.append(c)
        i += 1
    return "".join(out)


def looks_like_function(heading):
    """Whether the text before a `{` at namespace or class scope opens a function body."""
    h = " ".join(heading.split())
    if not h or "(" not in h or NOT_FUNCTIONS.search(h.split("(")[0]):
        return False
    if re.search(r"^\s*(if|for|while|switch|catch)\b", h):
        return False
    h = re.sub(r"\s*->\s*[^()]*(\([^()]*\))?[^()]*$", "", h)  # a trailing return type
    h = re.sub(r"\s+requires\s+.*$", "", h)
    h = QUALIFIERS.sub("", h)
    if h.endswith(")"):
        return True
    # A constructor's initializers: `X::X(...) : a_(x), b_{y}`.
    return re.search(r"\)\s*(noexcept\s*)?:[^:]", h) is not None


def functions(path):
    """(first line, last line, heading) of every function defined in the file."""
    text = blank_out(path.read_text(encoding="utf-8", errors="replace"))
    found = []
    stack = []  # per open brace: "scope" (namespace, class), "func" or "other"
    heading_start = 0  # where the current scope's pending heading began
    paren = 0
    func_start = None
    i = 0
    while i < len(text):
        c = text[i]
        in_scope = all(s == "scope" for s in stack)
        if c in "([":
            paren += 1
        elif c in ")]":
            paren = max(0, paren - 1)
        elif c == ";" and in_scope and paren == 0:
            heading_start = i + 1
        elif c == "{":
            if not in_scope or paren > 0:
                stack.append("other")
            else:
                heading = text[heading_start:i]
                ctor_init = re.search(r"\)\s*(noexcept\s*)?:[^:]", " ".join(heading.split()))
                before = text[:i].rstrip()
                if ctor_init and before and (before[-1].isalnum() or before[-1] in "_>"):
                    # A braced initializer in a constructor's initializer list.
                    depth, j = 1, i + 1
                    while j < len(text) and depth:
                        depth += {"{": 1, "}": -1}.get(text[j], 0)
                        j += 1
                    i = j
                    continue
                if looks_like_function(heading):
                    stripped = len(heading) - len(heading.lstrip())
                    func_start = (text.count("\n", 0, heading_start + stripped) + 1, heading)
                    stack.append("func")
                elif re.match(r"\s*(namespace|extern|class|struct|union)\b|.*\b(class|struct)\s",
                              " ".join(heading.split())) and "=" not in heading and "(" not in heading:
                    stack.append("scope")
                else:
                    stack.append("other")
                heading_start = i + 1
        elif c == "}":
            kind = stack.pop() if stack else "scope"
            if kind == "func" and all(s == "scope" for s in stack):
                end_line = text.count("\n", 0, i) + 1
                found.append((func_start[0], end_line, " ".join(func_start[1].split())))
            if all(s == "scope" for s in stack) and paren == 0:
                heading_start = i + 1
        i += 1
    return found


def name_of(heading):
    before = heading.split("(")[0].split()
    return before[-1] if before else heading[:40]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max", type=int, default=60)
    parser.add_argument("--all", action="store_true", help="print every function's length")
    parser.add_argument("paths", nargs="*")
    args = parser.parse_args()
    if args.paths:
        files = [Path(p) for p in args.paths]
    else:
        listed = subprocess.run(["git", "ls-files", *DEFAULT_DIRS], cwd=ROOT, check=True,
                                capture_output=True, text=True).stdout.split()
        files = [ROOT / f for f in listed if f.endswith((".h", ".cc"))]
    over = []
    for f in files:
        for first, last, heading in functions(f):
            length = last - first + 1
            shown = f.relative_to(ROOT) if f.is_relative_to(ROOT) else f
            if args.all:
                print(f"{length:5d} {shown}:{first} {name_of(heading)}")
            if length > args.max:
                over.append((length, f"{shown}:{first}", name_of(heading)))
    for length, where, name in sorted(over, reverse=True):
        print(f"{where}: {name} is {length} lines (at most {args.max})")
    if over:
        print(f"{len(over)} functions over {args.max} lines: split them into named steps")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
