"""A private redis-server on a free loopback port, for the Python measurements of bench/
(script_cost.py, lean_cost.py, lean/today_raise_gap.py). No persistence; stop it by its pid."""
import socket
import subprocess
import time

import redis


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def start_server(port, cpu=None, extra=()):
    """(the process, a client) once it answers PING; `cpu`: pin it there with taskset;
    `extra`: more redis-server arguments."""
    server = subprocess.Popen((["taskset", "-c", cpu] if cpu else []) +
                              ["redis-server", "--port", str(port), "--bind", "127.0.0.1",
                               "--save", "", "--appendonly", "no", *extra],
                              stdout=subprocess.DEVNULL)
    client = redis.Redis(port=port)
    for _ in range(100):
        try:
            client.ping()
            return server, client
        except redis.ConnectionError:
            time.sleep(0.05)
    server.kill()
    raise RuntimeError("redis-server did not start")
