#!/usr/bin/python3
"""Redis CPU per uncontended lock cycle: the raw floor, dlock's scripts, and the lean
prototypes of issue 32 (bench/lean/*.lua, docs/protocol-lean.md), one at a time and batched.

    taskset -c 1 nice -n 10 /usr/bin/python3 bench/lean_cost.py [ROUNDS] [N] [--one-at-a-time]
        [--server-cpu=C] [--before=DIR] [--only=TEXT]

`native SET NX PX + INCR` an acquisition with no script (docs/protocol-lean.md, "An acquisition
without a script"), released by today's release.lua, or by its release_batch.lua 64 at a time.
`dlock today` is src/scripts as a client of several nodes runs them (the name's counter),
`dlock today, one node` as a client of one node (the node's counter), `... dispatched K` the
same calls K to an EVALSHA of dispatcher() (group commit of today's scripts as they are), `fast
paths first` bench/lean/acquire_fastfirst.lua and release_fastfirst.lua; --before=DIR adds the rows
`dlock before` and `dlock before, one node` with the acquire.lua and release.lua of DIR (e.g.
an older checkout's src/scripts: `git worktree add /tmp/old 8b836e2`), called as that version
did (bench/script_ab.py compares two such folders in paired rounds).

Starts a private redis-server (it inherits the taskset, or runs on CPU C), checks the prototypes' replies once
(tokens grow, a held lock is refused, an older hold of the client is taken over, a client of
today's protocol and a lean one on one node, the max-ttl record written once per ttl, batches,
the raise, the waiter flag, plan B's WRONGTYPE), then runs ROUNDS rounds (default 5) of every
row, N lock cycles each (default 20000), the rows in a new shuffled order each round. All
numbers are per lock cycle (acquire + release of one new name). Per row and round:

  exec  INFO commandstats `usec` of the top-level commands (EVALSHA, SET), ÷ N: the time the
        commands ran, without parsing and socket work (what bench/script_cost.py reports);
        wall time inside Redis, so a busy machine inflates it (pipelined, the server runs
        without pause and is preempted inside its commands: unreliable on a shared machine).
  cpu   INFO cpu used_cpu_user + used_cpu_sys of the server (rusage) over the row, ÷ N:
        everything the server did, reading and writing the sockets included.

By default every command is pipelined (1,000 per flush), so `cpu` is the many-in-flight cost.
With --one-at-a-time each call waits for its reply before the next is sent (one call in
flight: a read, a reply and an event-loop wake-up per call, as a lone client pays); a batched
row then sends one call of K acquisitions at a time, which is group commit with K in flight.
Prints per row the median and least value over the rounds, the median of the per-round ratios
to the raw floor and the row's least ÷ the floor's least, the inner commands per cycle, then
every round's ratios. Needs python3-redis (bench/install-peers.sh, or apt-get install
python3-redis).
"""
import os
import random
import statistics
import sys

import redis

import redis_process
from redis_process import free_port
from script_text import with_key_clock

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.join(HERE, "..", "src", "scripts")
LEAN = os.path.join(HERE, "lean")
ARGS = [a for a in sys.argv[1:] if not a.startswith("--")]
PIPELINED = "--one-at-a-time" not in sys.argv
ROUNDS = int(ARGS[0]) if len(ARGS) > 0 else 5
N = int(ARGS[1]) if len(ARGS) > 1 else 20000
TTL = "30000"
COMPARE_AND_DELETE = ("if redis.call('get', KEYS[1]) == ARGV[1] then "
                      "return redis.call('del', KEYS[1]) else return 0 end")
# src/scripts/script.cc: these run with key_clock.lua before their text.
CLOCKED = ("acquire", "fair_acquire", "release", "renew", "inspect", "fair_leave")
FLOOR = "dlock:fence-floor"
MAX_TTL = "dlock:max-ttl"
MAX_TTL_OK = "dlock:max-ttl-ok:" + TTL


def start_server(port):
    pin = [a.split("=", 1)[1] for a in sys.argv if a.startswith("--server-cpu=")]
    return redis_process.start_server(port, pin[0] if pin else None)


BEFORE = [a.split("=", 1)[1] for a in sys.argv if a.startswith("--before=")]


def dispatcher():
    """Group commit without a batch script of its own: acquire.lua and release.lua as they are,
    each wrapped in a function of (KEYS, ARGV), behind key_clock.lua once, and a loop that runs
    the calls of one EVALSHA one after the other. ARGV: the number of calls, then per call the
    script (1 acquire, 2 release), its key count, its argument count and its arguments; KEYS:
    every call's keys in order. Replies {'d', reply_1, ...}: each call's own reply (an error
    caught by pcall in its place), so that one call's failure is only its own."""
    clock = open(os.path.join(SRC, "key_clock.lua")).read()
    text = clock
    for name in ("acquire", "release"):
        text += (f"local function {name}(KEYS, ARGV)\n" +
                 open(os.path.join(SRC, name + ".lua")).read() + "\nend\n")
    return text + """
local scripts, out, k, a = {acquire, release}, {'d'}, 1, 2
for i = 1, tonumber(ARGV[1]) do
  local f, nk, na = scripts[tonumber(ARGV[a])], tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2])
  local keys, args = {}, {}
  for j = 1, nk do keys[j] = KEYS[k + j - 1] end
  for j = 1, na do args[j] = ARGV[a + 2 + j] end
  k, a = k + nk, a + 3 + na
  local ok, reply = pcall(f, keys, args)
  if not ok and type(reply) ~= 'table' then reply = {err = tostring(reply)} end
  if reply == nil then reply = false end
  out[i + 1] = reply
end
return out
"""


def load(r):
    sha = {"dispatcher": r.script_load(dispatcher())}
    for prefix, src in [("", SRC)] + [("before_", d) for d in BEFORE]:
        for name in ("acquire", "release"):
            body = open(os.path.join(src, name + ".lua")).read()
            sha[prefix + name] = r.script_load(with_key_clock(src, body) if name in CLOCKED
                                               else body)
    for name in os.listdir(LEAN):
        if name.endswith(".lua"):
            sha[name[:-4]] = r.script_load(open(os.path.join(LEAN, name)).read())
    sha["cad"] = r.script_load(COMPARE_AND_DELETE)
    sha["today_release_batch"] = r.script_load(open(os.path.join(SRC, "release_batch.lua")).read())
    # As script.cc loads it: key_clock.lua (its server_ms) before the text.
    sha["today_acquire_batch"] = r.script_load(
        with_key_clock(SRC, open(os.path.join(SRC, "acquire_batch.lua")).read()))
    return sha


class Calls:
    """The commands of each row, for the names of one row and round."""

    def __init__(self, sha):
        self.sha = sha

    def raw(self, name):
        return [["SET", name, "v", "NX", "PX", TTL], ["EVALSHA", self.sha["cad"], 1, name, "v"]]

    def current(self, name, hold="c.1", counter="", prefix=""):
        return [["EVALSHA", self.sha[prefix + "acquire"], 6, name, "dlock:fence:{%s}" % name,
                 FLOOR, MAX_TTL, "dlock:readers:{%s}" % name, "dlock:writers-waiting:{%s}" % name,
                 "owner", hold, TTL, "w", "0", "0", counter],
                ["EVALSHA", self.sha[prefix + "release"], 4, name, "dlock:queue:{%s}" % name,
                 "dlock:queue-alive:{%s}" % name, "dlock:readers:{%s}" % name, "owner",
                 "dlock:release:{%s}" % name, hold, "w", "publish"]]

    def lean(self, name, plan_a, hold="c.1"):
        return [["EVALSHA", self.sha["acquire_lean"], 6, name, "dlock:readers:{%s}" % name,
                 "dlock:fence:{%s}" % name, FLOOR, MAX_TTL, MAX_TTL_OK, "owner", hold, TTL,
                 "1" if plan_a else ""],
                self.lean_release(name, hold)]

    def lean_release(self, name, hold="c.1"):
        return ["EVALSHA", self.sha["release_lean"], 3, name, "dlock:queue:{%s}" % name,
                "dlock:queue-alive:{%s}" % name, "owner", "dlock:release:{%s}" % name, hold,
                "publish"]

    def string_key(self, name, hold="c.1"):
        return [["EVALSHA", self.sha["acquire_str"], 5, name, "dlock:readers:{%s}" % name, FLOOR,
                 MAX_TTL, MAX_TTL_OK, "owner", hold, TTL],
                ["EVALSHA", self.sha["release_str"], 2, name, "dlock:queue:{%s}" % name, "owner",
                 "dlock:release:{%s}" % name, hold, "publish"]]

    def batch(self, names, plan_a, hold="c.1", flag=False):
        keys, args = [FLOOR, MAX_TTL, MAX_TTL_OK], [TTL, "1" if plan_a else ""]
        for n in names:
            keys += [n, "dlock:readers:{%s}" % n, "dlock:fence:{%s}" % n]
            args += ["owner", hold, TTL]
        acquire = ["EVALSHA", self.sha["acquire_batch"], len(keys)] + keys + args
        keys, args = [], ["publish", "flag" if flag else ""]
        for n in names:
            keys += [n, "dlock:queue:{%s}" % n]
            args += ["owner", hold, "dlock:release:{%s}" % n]
        release = ["EVALSHA", self.sha["release_batch"], len(keys)] + keys + args
        return [acquire, release]

    def bound(self, names, hold="c.1"):
        keys = ["dlock:bound-counter"] + list(names)
        values = [hold + " owner"] * len(names)
        return [["EVALSHA", self.sha["bound_batch"], len(keys)] + keys + ["a", TTL] + values,
                ["EVALSHA", self.sha["bound_batch"], len(keys)] + keys + ["r", TTL] + values]

    def native(self, name, hold="c.1"):
        """A sketch of an acquisition without a script (docs/protocol-lean.md, "Native
        commands"): the lock key written by SET NX PX in today's format, the token by INCR of
        the node's counter right behind it, released by today's release.lua."""
        return [["SET", name, "dlock. %s owner" % hold, "NX", "PX", TTL], ["INCR", FLOOR],
                self.current(name, hold, counter="n")[1]]

    def native_one_write(self, name, hold="c.1"):
        """native() with what the script's fast path also reads, all five commands in one write
        (one round trip): SET NX PX of the lock key, EXISTS of the readers and the name's
        counter after it (readers found: the client gives the hold back), INCR of the node's
        counter, ZSCORE of the max-ttl record and PEXPIRETIME of the key (the client compares
        them, and records the ttl before handing the lease out when the entry falls short).
        docs/protocol-lean.md, "Native commands without folding the readers"."""
        return [[["SET", name, "dlock. %s owner" % hold, "NX", "PX", TTL],
                 ["EXISTS", "dlock:readers:{%s}" % name, "dlock:fence:{%s}" % name],
                 ["INCR", FLOOR], ["ZSCORE", MAX_TTL, TTL], ["PEXPIRETIME", name]],
                self.current(name, hold, counter="n")[1]]

    def native_batch(self, names, hold="c.1"):
        """native() for `names`, released by today's release_batch.lua in one call."""
        out = [c for n in names for c in self.native(n, hold)[:2]]
        keys, args = [], []
        for n in names:
            keys.append(n)
            args += ["owner", "dlock:release:{%s}" % n, hold]
        return out + [["EVALSHA", self.sha["today_release_batch"], len(keys)] + keys + args +
                      ["publish"]]

    def group_commit(self, names, hold="c.1"):
        """Group commit as the client of one node sends it (node/coalescer.cc): today's
        acquire_batch.lua of `names` by the node's counter, then release_batch.lua of them."""
        keys, args = [FLOOR, MAX_TTL], []
        for n in names:
            keys += [n, "dlock:fence:{%s}" % n, "dlock:readers:{%s}" % n]
            args += ["owner", hold, TTL, "n"]
        acquire = ["EVALSHA", self.sha["today_acquire_batch"], len(keys)] + keys + args
        keys, args = [], []
        for n in names:
            keys.append(n)
            args += ["owner", "dlock:release:{%s}" % n, hold]
        return [acquire, ["EVALSHA", self.sha["today_release_batch"], len(keys)] + keys + args +
                ["publish"]]

    def dispatched(self, names):
        """today's one-node acquire, then release, of `names`: two EVALSHA of dispatcher()."""
        out = []
        for script, part in ((1, 0), (2, 1)):
            keys, args = [], [len(names)]
            for n in names:
                c = self.current(n, counter="n")[part]
                k = c[2]
                keys += c[3:3 + k]
                args += [script, k, len(c) - 3 - k] + c[3 + k:]
            out.append(["EVALSHA", self.sha["dispatcher"], len(keys)] + keys + args)
        return out

    def raise_node(self, token, names=()):
        keys, args = [FLOOR] + list(names), [token]
        for _ in names:
            args += ["owner", "c.1"]
        return [["EVALSHA", self.sha["fence_raise_node"], len(keys)] + keys + args]


def row_commands(calls, row, tag):
    """The commands of `row` for N cycles (new names, unique per round: `tag`)."""
    names = [f"{tag}:{i}" for i in range(N)]
    if row == "raw floor":
        return [c for n in names for c in calls.raw(n)]
    if row == "dlock today":
        return [c for n in names for c in calls.current(n)]
    if row == "dlock today, one node":
        return [c for n in names for c in calls.current(n, counter="n")]
    if row == "dlock before":
        return [c for n in names for c in calls.current(n, prefix="before_")]
    if row == "dlock before, one node":
        return [c for n in names for c in calls.current(n, counter="n", prefix="before_")]
    if row == "lean A (compatible keys)":
        return [c for n in names for c in calls.lean(n, True)]
    if row == "lean B (node marker)":
        return [c for n in names for c in calls.lean(n, False)]
    if row == "string key (comparison)":
        return [c for n in names for c in calls.string_key(n)]
    if row == "lean A + raise every cycle":
        # The worst case of the eager token: every grant followed by its raise round (the
        # token on the node already, as on the node that answered the largest).
        return [c for n in names for c in (calls.lean(n, True)[0], calls.raise_node(1, [n])[0],
                                           calls.lean_release(n))]
    if row.startswith("lean A batched 16 + raise"):
        k = 16
        out = []
        for j in range(0, N, k):
            acquire, release = calls.batch(names[j:j + k], True)
            out += [acquire, calls.raise_node(1, names[j:j + k])[0], release]
        return out
    if row == "native SET NX PX + INCR":
        return [c for n in names for c in calls.native(n)]
    if row == "native, five commands in one write":
        # The record as a grant of this ttl leaves it (so ZSCORE answers a score, as it mostly
        # does): one command for the row, nothing per cycle.
        return [["ZADD", MAX_TTL, "9" * 15, TTL]] + [c for n in names
                                                     for c in calls.native_one_write(n)]
    if row.startswith("native SET NX PX + INCR, release batched"):
        k = int(row.split()[-1])
        return [c for j in range(0, N, k) for c in calls.native_batch(names[j:j + k])]
    if row == "fast paths first, one node":
        return [["EVALSHA", calls.sha[s]] + c[2:] for n in names
                for s, c in zip(("acquire_fastfirst", "release_fastfirst"),
                                calls.current(n, counter="n"))]
    if row.startswith("dlock today, one node, group commit"):
        k = int(row.split()[-1])
        return [c for j in range(0, N, k) for c in calls.group_commit(names[j:j + k])]
    if row.startswith("dlock today, one node, dispatched"):
        k = int(row.split()[-1])
        return [c for j in range(0, N, k) for c in calls.dispatched(names[j:j + k])]
    if row.startswith("bound batched"):
        k = int(row.split()[-1])
        return [c for j in range(0, N, k) for c in calls.bound(names[j:j + k])]
    if row.startswith("lean B+flag batched"):
        k = int(row.split()[-1])
        return [c for j in range(0, N, k) for c in calls.batch(names[j:j + k], False, flag=True)]
    if row.startswith("lean A batched"):
        k = int(row.split()[-1])
        return [c for j in range(0, N, k) for c in calls.batch(names[j:j + k], True)]
    if row.startswith("lean B batched"):
        k = int(row.split()[-1])
        return [c for j in range(0, N, k) for c in calls.batch(names[j:j + k], False)]
    raise ValueError(row)


ROWS = ["raw floor"] + (["dlock before", "dlock before, one node"] if BEFORE else []) + [
        "dlock today", "dlock today, one node", "dlock today, one node, dispatched 1",
        "dlock today, one node, dispatched 16", "dlock today, one node, dispatched 64",
        "dlock today, one node, group commit 16", "dlock today, one node, group commit 64",
        "fast paths first, one node", "lean A (compatible keys)", "lean B (node marker)",
        "string key (comparison)", "lean A batched 4", "lean A batched 16", "lean A batched 64",
        "lean B batched 16", "lean B+flag batched 16", "lean B+flag batched 64",
        "lean A + raise every cycle", "lean A batched 16 + raise", "bound batched 16",
        "bound batched 64", "native SET NX PX + INCR", "native, five commands in one write",
        "native SET NX PX + INCR, release batched 64"]
# --only=TEXT[,TEXT...]: the raw floor and the rows whose name contains a TEXT (a shorter run).
ONLY = [t for a in sys.argv if a.startswith("--only=") for t in a.split("=", 1)[1].split(",")]
if ONLY:
    ROWS = [row for row in ROWS if row == "raw floor" or any(t in row for t in ONLY)]


def cpu_seconds(r):
    info = r.info("cpu")
    return info["used_cpu_user"] + info["used_cpu_sys"]


def run_row(r, commands, native=False):
    r.config_resetstat()
    before = cpu_seconds(r)
    # A list of commands in `commands` goes in one write (one round trip when one at a time).
    if PIPELINED:
        pipe = r.pipeline(transaction=False)
        for i, c in enumerate(commands):
            for one in (c if isinstance(c[0], list) else [c]):
                pipe.execute_command(*one)
            if i % 1000 == 999:
                for reply in pipe.execute(raise_on_error=True):
                    check_reply(reply)
        for reply in pipe.execute(raise_on_error=True):
            check_reply(reply)
    else:
        for c in commands:
            if isinstance(c[0], list):
                pipe = r.pipeline(transaction=False)
                for one in c:
                    pipe.execute_command(*one)
                for reply in pipe.execute(raise_on_error=True):
                    check_reply(reply)
            else:
                check_reply(r.execute_command(*c))
    cpu = cpu_seconds(r) - before
    stats = r.info("commandstats")
    top = ("cmdstat_evalsha", "cmdstat_set")
    if native:  # commands of their own there, inside the scripts elsewhere
        top += ("cmdstat_incr", "cmdstat_exists", "cmdstat_zscore", "cmdstat_pexpiretime")
    usec = sum(v["usec"] for k, v in stats.items() if k in top)
    inner = {k[len("cmdstat_"):]: v["calls"] / N for k, v in stats.items()
             if k not in ("cmdstat_evalsha", "cmdstat_config|resetstat", "cmdstat_info")}
    r.flushall()
    return usec / N, cpu * 1e6 / N, inner


def check_reply(reply):
    """Every cycle of the rows is uncontended: a refusal or a fallback is a broken prototype."""
    if isinstance(reply, list) and reply and reply[0] == b"d":  # dispatcher(): each call's reply
        if not all(isinstance(x, int) and x >= 0 for x in reply[1:]):
            raise RuntimeError(f"a dispatched call was refused or failed: {reply}")
    elif isinstance(reply, list):
        if any(x is None for x in reply):
            raise RuntimeError(f"a batched name was sent back to its own script: {reply}")
        if reply and reply[0] in (0, -2) and len(reply) <= 3:
            raise RuntimeError(f"unexpected reply {reply}")
        if any(isinstance(x, int) and x < 0 for x in reply):
            raise RuntimeError(f"a batched name was not granted or released: {reply}")
    elif isinstance(reply, int) and reply < 0:
        raise RuntimeError(f"unexpected reply {reply}")


def functional_checks(r, calls):
    """The prototypes do what docs/protocol-lean.md says (once, before measuring)."""
    r.flushall()
    a = calls.lean("f", True)[0]
    t1 = r.execute_command(*a)
    assert t1 > 10 ** 15, t1  # no counter: seeded from the clock in microseconds
    assert r.get(FLOOR) == str(t1).encode(), (r.get(FLOOR), t1)  # no '1.7e+15' string
    assert r.zscore(MAX_TTL, TTL) is not None and r.pttl(MAX_TTL_OK) > 0
    held = r.execute_command(*calls.lean("f", True, hold="d.1")[0])
    assert held[0] == 0 and held[1] == t1 and held[2] > 0, held
    stale = r.execute_command(*calls.lean("f", True, hold="c.2")[0])  # an older hold of c
    assert stale == t1 + 1, stale
    assert r.execute_command(*calls.lean_release("f", "c.1")) == -1  # taken over
    assert r.execute_command(*calls.lean_release("f", "c.2")) == 0
    # The old protocol's per-name counter is dropped on a lean grant (plan A): a client of the
    # current protocol counts from the floor, above every lean token.
    r.set("dlock:fence:{g}", 5)
    t2 = r.execute_command(*calls.lean("g", True)[0])
    assert r.get("dlock:fence:{g}") is None and t2 == t1 + 2
    old = r.execute_command(*calls.current("g", hold="e.1")[0])
    assert old[0] == 0 and old[1] == t2, old  # held; the old client reads the floor
    r.execute_command(*calls.lean_release("g"))
    old = r.execute_command(*calls.current("g", hold="e.1")[0])
    assert old == t2 + 1, old  # a grant of today's scripts after the lean one: larger
    t3 = r.execute_command(*calls.lean("h", True)[0])
    assert t3 == t2 + 2, t3  # and a lean grant after it, larger again
    # The max-ttl record is written once per ttl while its marker lives.
    r.config_resetstat()
    for i in range(50):
        r.execute_command(*calls.lean(f"m{i}", True)[0])
    assert "cmdstat_zadd" not in r.info("commandstats")
    # Batches: one INCR, one outcome per name.
    r.set("b:held", "x")
    out = r.execute_command(*calls.batch(["b:1", "b:held", "b:2"], True)[0])
    assert out[0] == t3 + 51 and out[1] == 1 and out[3] == 1 and out[2] == -1, out
    rel = r.execute_command(*calls.batch(["b:1", "b:held", "b:2"], True)[1])
    assert rel == [0, -1, 0], rel
    # The waiter flag: a release publishes only when the field '' says someone waits.
    r.execute_command(*calls.batch(["w:1", "w:2"], True)[0])
    r.hset("w:2", "", "1")
    p = r.pubsub()
    p.subscribe("dlock:release:{w:1}", "dlock:release:{w:2}")
    rel = r.execute_command(*calls.batch(["w:1", "w:2", "b:held"], True, flag=True)[1])
    assert rel == [0, 1, -1], rel
    p.close()
    r.execute_command(*calls.batch(["b:3"], True)[0])
    assert r.execute_command(*calls.raise_node(out[0] + 100, ["b:3", "b:1"])[0]) == \
        [out[0] + 100, 1, 0]
    assert r.execute_command(*calls.raise_node(5)[0]) == [out[0] + 100]
    # The dispatcher: each call's own reply; the fast-paths-first prototypes as today's.
    d = calls.current("d:1", counter="n")
    out = r.execute_command(*calls.dispatched(["d:1", "d:2"])[0])
    assert out[0] == b"d" and out[2] == out[1] + 1, out
    assert r.execute_command(*calls.dispatched(["d:1", "d:2"])[1]) == [b"d", 0, 0]
    assert r.execute_command(*d[1]) == -1  # released by the dispatched call
    r.delete(MAX_TTL)
    r.hset(MAX_TTL, "x", 1)  # every grant's record fails: an error in its call's place
    bad = r.execute_command(*calls.dispatched(["d:4"])[0])
    assert bad[0] == b"d" and isinstance(bad[1], redis.ResponseError), bad
    r.delete(MAX_TTL)
    f = ["EVALSHA", calls.sha["acquire_fastfirst"]] + calls.current("d:3", counter="n")[0][2:]
    assert r.execute_command(*f) == out[2] + 2
    f = ["EVALSHA", calls.sha["release_fastfirst"]] + calls.current("d:3", counter="n")[1][2:]
    assert r.execute_command(*f) == 0 and not r.exists("d:3")
    # Plan B: the counter is a hash field (an old client's GET of it fails: the marker).
    r.flushall()
    b1 = r.execute_command(*calls.lean("p", False)[0])
    assert r.type(FLOOR) == b"hash" and b1 > 10 ** 15, b1
    held = r.execute_command(*calls.lean("p", False, hold="d.1")[0])
    assert held == [0, b1, held[2]], held
    out = r.execute_command(*calls.batch(["p", "q"], False)[0])
    assert out[0] == b1 + 1 and out[2] == 1, out
    try:
        r.execute_command(*calls.current("z", hold="e.1")[0])
        raise AssertionError("an old acquire ran on a plan-B node")
    except redis.ResponseError as e:
        assert "WRONGTYPE" in str(e), e
    r.flushall()


def main():
    server, r = start_server(free_port())
    try:
        calls = Calls(load(r))
        functional_checks(r, calls)
        results = {row: [] for row in ROWS}
        for rnd in range(ROUNDS):
            order = ROWS[:]
            random.shuffle(order)
            for row in order:
                results[row].append(run_row(r, row_commands(calls, row, f"r{rnd}"),
                                            native=row.startswith("native")))
        floor = results["raw floor"]
        mode = "pipelined (many in flight)" if PIPELINED else "one call at a time"
        print(f"{mode}; {N} cycles per row, {ROUNDS} rounds. exec = commandstats usec, "
              "cpu = server rusage, per lock cycle (µs): median and min over the rounds; "
              "÷floor: the median of the per-round ratios to the raw floor, and the row's "
              "min ÷ the floor's min (the least disturbed runs).")
        print(f"{'row':38s} {'exec med':>8s} {'min':>6s} {'÷floor':>7s} {'min':>6s}  "
              f"{'cpu med':>7s} {'min':>6s} {'÷floor':>7s} {'min':>6s}   inner commands per cycle")
        for row in ROWS:
            res = results[row]
            cols = []
            for k in (0, 1):
                vals = [x[k] for x in res]
                ratios = [x[k] / f[k] for x, f in zip(res, floor)]
                least = min(f[k] for f in floor)
                cols.append(f"{statistics.median(vals):8.2f} {min(vals):6.2f} "
                            f"{statistics.median(ratios):6.2f}× {min(vals) / least:5.2f}×")
            inner = res[-1][2]
            print(f"{row:38s} {cols[0]}  {cols[1]}   " +
                  " ".join(f"{k}={v:.2g}" for k, v in sorted(inner.items())))
        for k, what in ((0, "exec"), (1, "cpu")):
            print(f"per-round {what} ratios to the floor:")
            for row in ROWS:
                print(f"  {row:38s} " + " ".join(f"{x[k] / f[k]:.2f}"
                                                 for x, f in zip(results[row], floor)))
    finally:
        server.terminate()
        server.wait()


if __name__ == "__main__":
    main()
