#!/usr/bin/env python3
"""The layers of src/ (docs/design.md) as rules a change cannot break unnoticed.

Each layer folder may include only the folders listed for it (and public <dlock/...> headers):
one rule per arrow of the layer table; every file of src/ is in one of those folders. Beyond
includes, two facts that an include rule cannot see: Redis key names ("dlock:...") are written
only in lock/keys.h (and the Lua scripts), and the node layer names no script of the lock (it
routes by node::Call's typed facts; it may load them all, scripts::all()). Prints every breach and exits 1 if there is one."""
import pathlib
import re
import sys

SRC = pathlib.Path(__file__).resolve().parent.parent / "src"

# layer -> the layers its files may include (itself always).
ALLOWED = {
    "resp": set(),
    "engine": set(),
    "scripts": set(),
    "net": {"resp"},
    "node": {"net", "resp", "engine", "scripts"},
    "lock": {"node", "net", "resp", "engine", "scripts"},
    "core": {"lock", "node", "net", "resp", "engine", "scripts"},
    "recipes": {"core", "lock", "engine", "scripts"},
    "api": {"core", "lock", "engine"},
    "metrics": set(),
}

INCLUDE = re.compile(r'^\s*#\s*include\s+"([a-z_]+)/', re.M)
KEY_LITERAL = re.compile(r'"dlock:')
NAMED_SCRIPT = re.compile(r"scripts::(?!all\b|Script\b)[a-z_]+\(")


def sources(folder):
    return sorted(p for p in folder.rglob("*") if p.suffix in (".h", ".cc"))


def main():
    breaches = []
    for layer, allowed in ALLOWED.items():
        for path in sources(SRC / layer):
            text = path.read_text()
            rel = path.relative_to(SRC.parent)
            for target in INCLUDE.findall(text):
                if target != layer and target not in allowed:
                    breaches.append(f"{rel}: {layer}/ includes {target}/")
            if layer == "node" and NAMED_SCRIPT.search(text):
                breaches.append(f"{rel}: the node layer names a lock script")
    for path in sources(SRC):
        if path.parent == SRC or path.relative_to(SRC).parts[0] not in ALLOWED:
            breaches.append(f"{path.relative_to(SRC.parent)}: outside every layer folder")
        if path.relative_to(SRC).as_posix() == "lock/keys.h":
            continue
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if KEY_LITERAL.search(line) and not line.lstrip().startswith("//"):
                breaches.append(f"{path.relative_to(SRC.parent)}:{n}: a dlock: key named outside "
                                "lock/keys.h")
    for b in breaches:
        print(b)
    if breaches:
        print(f"{len(breaches)} layer rule(s) broken (scripts/check-layers.py, docs/design.md)")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
