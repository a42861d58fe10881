// SPDX-License-Identifier: MIT
// One client process of chaos_test.py on @grpc/grpc-js: the Node.js twin of mutex_worker.py
// (modes cycles, hold and wait; the same JSON lines on stdout). Times are
// process.hrtime.bigint(), libuv's CLOCK_MONOTONIC, the clock Python's time.monotonic_ns
// reads, so both languages' critical sections go into one history.
//
// Usage: node mutex_worker.js NODE_MODULES PROTO_DIR CONFIG_JSON
'use strict';

const path = require('path');

const [modules, protoDir, configJson] = process.argv.slice(2);
const config = JSON.parse(configJson);
const grpc = require(path.join(modules, '@grpc/grpc-js'));
const protoLoader = require(path.join(modules, '@grpc/proto-loader'));

const definition = protoLoader.loadSync('dlock/v1/lock.proto', {
  includeDirs: [protoDir], keepCase: true, longs: String, enums: String, defaults: true,
});
const { Locks } = grpc.loadPackageDefinition(definition).dlock.v1;
const stubs = config.addresses.map((a) => new Locks(a, grpc.credentials.createInsecure()));
const RETRY = [grpc.status.UNAVAILABLE, grpc.status.CANCELLED];

// A seeded generator (mulberry32), so that a run can be repeated.
let seed = (config.seed || 1) >>> 0;
function random() {
  seed = (seed + 0x6d2b79f5) >>> 0;
  let t = seed;
  t = Math.imul(t ^ (t >>> 15), t | 1);
  t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
}
const pick = (list) => list[Math.floor(random() * list.length)];
const now = () => process.hrtime.bigint();
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

// Fencing tokens and times are written as JSON numbers from their exact decimal strings.
function emit(kind, fields) {
  const parts = Object.entries(fields).map(([k, v]) => {
    const text = typeof v === 'bigint' || (typeof v === 'string' && k === 'token')
      ? String(v) : JSON.stringify(v);
    return `${JSON.stringify(k)}:${text}`;
  });
  process.stdout.write(`{"${kind}":{${parts.join(',')}}}\n`);
}

function call(method, request, seconds) {
  return new Promise((resolve, reject) => {
    const deadline = new Date(Date.now() + seconds * 1000);
    pick(stubs)[method](request, { deadline }, (err, r) => (err ? reject(err) : resolve(r)));
  });
}

// True when released; false when the nodes say it was not held (after an attempt that a dead
// instance may have carried out, that is no loss).
async function release(name, owner, afterUnavailable = false) {
  for (let i = 0; i < 50; i++) {
    try {
      await call('Release', { name, owner }, 20);
      return true;
    } catch (err) {
      if (err.code === grpc.status.FAILED_PRECONDITION) return afterUnavailable;
      if (!RETRY.includes(err.code)) throw err;
      afterUnavailable = true;
      await sleep(50);
    }
  }
  throw new Error(`no instance released ${name}`);
}

// {grant, sent, first}; grant null: the wait ran out. A refused try is tried again; a dead
// instance's call, on another (after giving back what it may have granted).
async function acquire(name, owner, waitMs, fair) {
  const first = now();
  for (;;) {
    const sent = now();
    try {
      const grant = await call('Acquire', { name, owner, ttl_ms: config.ttl_ms, wait_ms: waitMs,
        fair }, waitMs / 1000 + 20);
      return { grant, sent, first };
    } catch (err) {
      if (err.code === grpc.status.DEADLINE_EXCEEDED) return { grant: null, sent, first };
      if (RETRY.includes(err.code)) await release(name, owner, true);
      else if (err.code !== grpc.status.ABORTED) throw err;
      await sleep(1 + random() * 9);
    }
  }
}

async function cycle(number) {
  const name = pick(config.names);
  const owner = `${config.id}-${number}`;
  const waitMs = pick([0, config.wait_ms]);
  const { grant, sent, first } = await acquire(name, owner, waitMs, waitMs > 0 && random() < 0.5);
  const event = { name, holder: config.id, token: '0', wait_ns: first, read_ns: 0, write_ns: 0,
    paused: false, skewed: false };
  if (grant === null) {
    const t = now();
    emit('event', { ...event, acquire_ns: t, valid_until_ns: t, release_ns: t,
      outcome: 'timeout' });
    return;
  }
  const entered = now();
  await sleep(1 + random() * 4);
  const left = now();
  emit('event', { ...event, token: grant.fencing_token, acquire_ns: entered,
    valid_until_ns: sent + BigInt(grant.validity_ms) * 1000000n, release_ns: left,
    outcome: 'accepted' });
  if (!(await release(name, owner))) emit('lost', { name, owner, token: grant.fencing_token });
}

async function hold() {
  const name = config.names[0];
  const owner = config.id;
  const { grant, sent } = await acquire(name, owner, config.wait_ms, false);
  emit('hold', { name, owner, token: grant.fencing_token, sent_ns: sent,
    validity_ms: Number(grant.validity_ms) });
  for (;;) {
    await sleep(config.ttl_ms / 4);
    const t = now();
    const answer = await call('Extend', { name, owner, ttl_ms: config.ttl_ms }, 20);
    emit('hold', { name, owner, token: grant.fencing_token, sent_ns: t,
      validity_ms: Number(answer.validity_ms) });
  }
}

async function wait() {
  emit('waiting', { sent_ns: now() });
  const { grant } = await acquire(config.names[0], config.id, config.wait_ms, config.fair);
  emit('granted', { token: grant ? grant.fencing_token : '0' });
}

async function main() {
  if (config.mode === 'hold') return hold();
  if (config.mode === 'wait') return wait();
  const end = Date.now() + config.seconds * 1000;
  for (let n = 0; Date.now() < end; n++) await cycle(n);
  return undefined;
}

main().then(
  () => process.exit(0),
  (err) => {
    console.error(err && err.stack ? err.stack : err);
    process.exit(1);
  },
);
