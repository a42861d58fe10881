// SPDX-License-Identifier: MIT
// node-redlock (npm redlock 5, which returns at quorum) on ioredis under the benchmark's
// workloads; run by dlock_bench with NODE_PATH pointing at bench/run.sh's npm folder.
// Usage: node redlock_bench.js MODE PARAMS_JSON   -> one JSON object on stdout.
//   latency    {"ports": [...], "cycles": n, "warmup": w}           -> {"samples_ns": [...]}
//   throughput {"ports": [p], "inflight": k, "seconds": s}           -> {"per_second": x}
//   contend    {"ports": [...], "name": s, "count": n, "hold_us": h,
//               "start_at_ns": t, "retry_ms": r}                     -> {"events": [[s, a, r]]}
//   versions   {}                                                    -> {"node", "redlock", "ioredis"}
// Timestamps: process.hrtime.bigint() reads CLOCK_MONOTONIC, like the other workers.
"use strict";
const Redis = require("ioredis");
const Redlock = require("redlock").default;

const now = () => Number(process.hrtime.bigint());
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

function redlock(params, settings) {
  const clients = params.ports.map((port) => new Redis({ host: "127.0.0.1", port }));
  return { clients, redlock: new Redlock(clients, settings) };
}

async function latency(params) {
  const { clients, redlock: rl } = redlock(params, { retryCount: 0 });
  const samples = [];
  for (let i = -params.warmup; i < params.cycles; ++i) {
    const t0 = now();
    const lock = await rl.acquire(["bench:latency"], 30000);
    await lock.release();
    if (i >= 0) samples.push(now() - t0);
  }
  clients.forEach((c) => c.disconnect());
  return { samples_ns: samples };
}

async function throughput(params) {
  const { clients, redlock: rl } = redlock(params, { retryCount: 0 });
  let stop = false;
  let count = 0;
  const loop = async (i) => {
    while (!stop) {
      const lock = await rl.acquire(["bench:tp:" + i], 30000);
      await lock.release();
      ++count;
    }
  };
  const t0 = now();
  const loops = [];
  for (let i = 0; i < params.inflight; ++i) loops.push(loop(i));
  await sleep(params.seconds * 1000);
  stop = true;
  const t1 = now();
  await Promise.all(loops);
  clients.forEach((c) => c.disconnect());
  return { per_second: count / ((t1 - t0) / 1e9) };
}

async function contend(params) {
  // retryCount -1: retry until acquired. retryDelay: the benchmark's retry pause, the same one
  // redis-py is given (redlock's default is 200 ms, jitter 100 ms).
  const { clients, redlock: rl } = redlock(params, {
    retryCount: -1,
    retryDelay: params.retry_ms,
    retryJitter: Math.floor(params.retry_ms / 2),
  });
  while (now() < params.start_at_ns) await sleep(0.2);
  const events = [];
  for (let i = 0; i < params.count; ++i) {
    const start = now();
    const lock = await rl.acquire([params.name], 30000);
    const acquired = now();
    await sleep(params.hold_us / 1000);
    const released = now();
    await lock.release();
    events.push([start, acquired, released]);
  }
  clients.forEach((c) => c.disconnect());
  return { events };
}

// The installed versions of the packages measured.
async function versions() {
  const fs = require("fs");
  const path = require("path");
  const version = (name) => {
    let dir = path.dirname(require.resolve(name));
    while (!fs.existsSync(path.join(dir, "package.json")) || path.basename(dir) !== name) {
      dir = path.dirname(dir);
    }
    return JSON.parse(fs.readFileSync(path.join(dir, "package.json"), "utf8")).version;
  };
  return { node: process.version, redlock: version("redlock"), ioredis: version("ioredis") };
}

const [mode, json] = process.argv.slice(2);
const run = { latency, throughput, contend, versions }[mode];
run(JSON.parse(json || "{}")).then(
  (result) => process.stdout.write(JSON.stringify(result) + "\n"),
  (error) => {
    process.stderr.write(String(error && error.stack ? error.stack : error) + "\n");
    process.exit(1);
  },
);
