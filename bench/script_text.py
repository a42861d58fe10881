"""A script's text as src/scripts/script.cc sends it, for the Python measurements of bench/
(script_cost.py, lean_cost.py): key_clock.lua's functions at the script's line
KEY_CLOCK_HERE (after a fast path that makes none of them), else before its text."""
import os

KEY_CLOCK_HERE = "-- key_clock.lua goes here (script.cc)"


def with_key_clock(src, body):
    """`body` (a clocked script's text) with key_clock.lua of the folder `src` in its place."""
    clock = open(os.path.join(src, "key_clock.lua")).read()
    at = body.find(KEY_CLOCK_HERE)
    return body[:at] + clock + body[at:] if at >= 0 else clock + body
