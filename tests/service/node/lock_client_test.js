// SPDX-License-Identifier: MIT
// A Node.js client of `dlock serve` on @grpc/grpc-js, with the .proto loaded at run time by
// @grpc/proto-loader (no code generation): acquire, a second acquire refused with ABORTED,
// extend, release, and the fencing token read without precision loss (a uint64: proto-loader
// gives it as a decimal string with longs: String, never a JavaScript number, which is exact
// only up to 2^53).
//
// Usage: node lock_client_test.js NODE_MODULES PROTO_DIR ADDRESS NAME
// Prints one JSON line {"fencing_token", "owner", "validity_ms", "extended_ms"} on success;
// exits 1 with the failed check on stderr otherwise. node_test.py drives it.
'use strict';

const path = require('path');
const assert = require('assert');

const [modules, protoDir, address, name] = process.argv.slice(2);
const grpc = require(path.join(modules, '@grpc/grpc-js'));
const protoLoader = require(path.join(modules, '@grpc/proto-loader'));

const definition = protoLoader.loadSync('dlock/v1/lock.proto', {
  includeDirs: [protoDir],
  keepCase: true,  // the .proto's field names (fencing_token), as every other client sees them
  longs: String,  // uint64 and int64 as decimal strings: exact past 2^53
  enums: String,
  defaults: true,
});
const { Locks } = grpc.loadPackageDefinition(definition).dlock.v1;
const locks = new Locks(address, grpc.credentials.createInsecure());

// A unary call as a promise, with a 30 s deadline.
function call(method, request) {
  return new Promise((resolve, reject) => {
    const deadline = new Date(Date.now() + 30000);
    locks[method](request, { deadline }, (err, response) => (err ? reject(err) : resolve(response)));
  });
}

// The client's own uint64 path, past what the service's tokens reach today: a response with the
// largest uint64 goes through the same (de)serializer gRPC calls use, unchanged.
function checkUint64Decoding() {
  const acquire = definition['dlock.v1.Locks'].Acquire;
  const max = '18446744073709551615';  // 2^64 - 1
  const bytes = acquire.responseSerialize({ owner: 'o', fencing_token: max, validity_ms: '1' });
  assert.strictEqual(acquire.responseDeserialize(bytes).fencing_token, max);
}

async function main() {
  checkUint64Decoding();
  const grant = await call('Acquire', { name, ttl_ms: 10000 });
  assert.strictEqual(typeof grant.fencing_token, 'string', 'the token is a decimal string');
  assert.match(grant.fencing_token, /^[1-9][0-9]*$/);
  assert.ok(grant.owner.length > 0, 'an owner');
  const validity = Number(grant.validity_ms);
  assert.ok(validity > 5000 && validity <= 10000, `validity ${validity}`);

  // Held: a second acquire (another owner) is refused with ABORTED.
  const refused = await call('Acquire', { name, ttl_ms: 10000 }).then(
    () => assert.fail('a second acquire was granted'),
    (err) => err,
  );
  assert.strictEqual(refused.code, grpc.status.ABORTED, `status ${refused.code}`);

  const extended = await call('Extend', { name, owner: grant.owner, ttl_ms: 20000 });
  assert.ok(Number(extended.validity_ms) > 10000, `extended ${extended.validity_ms}`);

  await call('Release', { name, owner: grant.owner });
  // Released: the owner's token releases nothing any more.
  const again = await call('Release', { name, owner: grant.owner }).then(
    () => assert.fail('released twice'),
    (err) => err,
  );
  assert.strictEqual(again.code, grpc.status.FAILED_PRECONDITION);

  console.log(JSON.stringify({
    fencing_token: grant.fencing_token,
    owner: grant.owner,
    validity_ms: validity,
    extended_ms: Number(extended.validity_ms),
  }));
}

main().then(
  () => { locks.close(); },
  (err) => {
    console.error(err && err.stack ? err.stack : err);
    locks.close();
    process.exit(1);
  },
);
