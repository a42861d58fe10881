#!/usr/bin/python3
"""Replays, on three real redis-servers with today's scripts (src/scripts), the schedule of
docs/protocol-lean.md "A suspected gap in today's raise". The client side is emulated by hand
from src/lock/tally.cc (tally_acquire: the token is the largest granted counter or a refusing
node's counter + 1; held on a quorum when a quorum of voting granting nodes answered it) and
src/lock/quorum_lock.cc (raise_fence: a node confirms when it replies a counter >= the token,
whichever node it is). Not a test of the C++ client: a check that the scripts answer as the
schedule says, so that a directed simulation is worth writing. It emulates the rule as it
was before e6d0f07, which now counts only granting voters (docs/simulation.md finding 10),
and the raise script as it was before finding 11 (RAISE below: it did not name the hold; today's
fence_raise.lua replies -1 where the hold is gone, so C's answer in step 4 would not count).

    /usr/bin/python3 bench/lean/today_raise_gap.py
"""
import os
import sys


sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from redis_process import free_port, start_server  # noqa: E402

SRC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "src", "scripts")
QUORUM = 2


def start():
    return start_server(free_port())


def script(name, clocked):
    body = open(os.path.join(SRC, name + ".lua")).read()
    return (open(os.path.join(SRC, "key_clock.lua")).read() + body) if clocked else body


ACQUIRE = script("acquire", True)
RELEASE = script("release", True)
# fence_raise.lua before finding 11 (KEYS counter, floor; ARGV token, ttl; replies the counter).
RAISE = """
local current = tonumber(redis.call('get', KEYS[1]) or redis.call('get', KEYS[2]) or '0')
local token = tonumber(ARGV[1])
if current >= token then
  return current
end
redis.call('set', KEYS[1], ARGV[1], 'px', ARGV[2])
if token > tonumber(redis.call('get', KEYS[2]) or '0') then redis.call('set', KEYS[2], ARGV[1]) end
return token
"""


def acquire(r, owner, hold):
    """acquire.lua's reply as [status, counter, detail] (a grant is the bare token)."""
    reply = r.eval(ACQUIRE, 6, "X", "dlock:fence:{X}", "dlock:fence-floor", "dlock:max-ttl",
                   "dlock:readers:{X}", "dlock:writers-waiting:{X}", owner, hold, "30000", "w",
                   "0", "0", "")
    return [1, reply, 0] if isinstance(reply, int) else reply


def release(r, owner, hold):
    return r.eval(RELEASE, 4, "X", "dlock:queue:{X}", "dlock:queue-alive:{X}",
                  "dlock:readers:{X}", owner, "dlock:release:{X}", hold, "w", "publish")


def fence_raise(r, token):
    return r.eval(RAISE, 2, "dlock:fence:{X}", "dlock:fence-floor", token, "30000")


def tally(replies):
    """tally_acquire for the nodes that answered (all voting)."""
    token = 0
    for status, counter, _ in replies.values():
        token = max(token, counter if status == 1 else counter + 1)
    granted = [n for n, (status, _, _) in replies.items() if status == 1]
    holding = [n for n, (status, counter, _) in replies.items() if status == 1 and counter == token]
    return token, granted, len(holding) >= QUORUM


def main():
    servers = {n: start() for n in "ABC"}
    nodes = {n: c for n, (_, c) in servers.items()}
    try:
        # 1. Counters of X: A 4, B 2 (it missed two grants), C 4.
        for n, v in (("A", 4), ("B", 2), ("C", 4)):
            nodes[n].set("dlock:fence:{X}", v, px=30000)
            nodes[n].set("dlock:fence-floor", v)
        # 2. H1: A and B grant; C never runs the call.
        h1 = {n: acquire(nodes[n], "o1", "c1.1") for n in "AB"}
        t1, granted1, on_quorum = tally(h1)
        print(f"H1 replies {h1}: token {t1}, granted by {granted1}, on a quorum: {on_quorum}")
        assert t1 == 5 and not on_quorum
        # 3. H2 (another client) runs on C before H1's raise gets there.
        h2 = {"C": acquire(nodes["C"], "o2", "c2.1")}
        print(f"H2 on C: {h2['C']}")
        # 4. H1's raise: A and C answer, B's call is not sent.
        raised = {n: fence_raise(nodes[n], t1) for n in "AC"}
        confirmed_today = [n for n, v in raised.items() if v >= t1]
        confirmed_lean = [n for n in confirmed_today if n in granted1]
        print(f"H1 raise replies {raised}: today's rule confirms {confirmed_today}, "
              f"the lean rule (granting nodes only) {confirmed_lean}")
        assert len(confirmed_today) >= QUORUM and len(confirmed_lean) < QUORUM
        # H1 holds with token t1 (today's rule), then releases.
        for n in "ABC":
            release(nodes[n], "o1", "c1.1")
        # 5. H2's delayed call runs on B now; its call to A gets no answer.
        h2["B"] = acquire(nodes["B"], "o2", "c2.1")
        t2, granted2, on_quorum = tally(h2)
        print(f"H2 replies {h2}: token {t2}, granted by {granted2}, on a quorum: {on_quorum}")
        raised = {n: fence_raise(nodes[n], t2) for n in "AB"}
        confirmed = [n for n, v in raised.items() if v >= t2]
        print(f"H2 raise replies {raised}: confirmed by {confirmed}")
        assert len(granted2) >= QUORUM and len(confirmed) >= QUORUM
        print(f"H1 held token {t1}, then H2 got token {t2}: "
              + ("NOT strictly larger" if t2 <= t1 else "larger"))
    finally:
        for server, _ in servers.values():
            server.terminate()
            server.wait()


if __name__ == "__main__":
    main()
