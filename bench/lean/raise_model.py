#!/usr/bin/python3
"""How often a per-node fencing counter needs the raise round (docs/protocol-lean.md).

A MODEL, not a measurement of Redis: N nodes each keep one counter; C clients send
uncontended acquisitions of distinct names to every node (Poisson, R per second in all),
each request delayed by a lognormal one-way latency (median 50 µs, sigma 0.5), in order per
client and node (one TCP connection each). A node answers its counter after the INCR (or,
with --propose, after max(counter + 1, P), P the client's clock in µs plus a fixed skew per
client). The token is the largest answer; the lease needs the raise round unless at least a
quorum of the nodes answered exactly the token. Prints the share of acquisitions that needed it.

    /usr/bin/python3 bench/lean/raise_model.py
"""
import heapq
import random
import sys


def simulate(nodes, clients, rate, propose, skew_us=50.0, count=20000, seed=1):
    rng = random.Random(seed)
    quorum = nodes // 2 + 1
    skews = [rng.uniform(-skew_us, skew_us) for _ in range(clients)]
    last_arrival = [[0.0] * nodes for _ in range(clients)]
    events = []  # (arrival time µs, node, acquisition, proposal)
    t = 0.0
    for a in range(count):
        t += rng.expovariate(rate / 1e6)
        c = rng.randrange(clients)
        p = int(t + skews[c])
        for i in range(nodes):
            arrival = max(last_arrival[c][i], t + rng.lognormvariate(3.9, 0.5))  # e^3.9 ≈ 50
            last_arrival[c][i] = arrival
            heapq.heappush(events, (arrival, i, a, p))
    counter = [0] * nodes
    answers = [[0] * nodes for _ in range(count)]
    while events:
        _, i, a, p = heapq.heappop(events)
        counter[i] = max(counter[i] + 1, p) if propose else counter[i] + 1
        answers[a][i] = counter[i]
    need = sum(1 for ans in answers if ans.count(max(ans)) < quorum)
    return need / count


def main():
    propose = "--propose" in sys.argv
    print(f"share of acquisitions that need the raise round ({'proposal' if propose else 'INCR'})")
    print(f"{'nodes':>5} {'clients':>7} " + " ".join(f"{r:>9}/s" for r in (1000, 10000, 100000)))
    for nodes in (3, 5):
        for clients in (1, 4, 64):
            shares = [simulate(nodes, clients, r, propose) for r in (1000, 10000, 100000)]
            print(f"{nodes:5d} {clients:7d} " + " ".join(f"{s:10.1%} " for s in shares))


if __name__ == "__main__":
    main()
