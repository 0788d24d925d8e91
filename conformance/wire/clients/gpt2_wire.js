#!/usr/bin/env node
// gpt2_wire.js - GPT-2's token + position embedding and its tied output head, served over the
// gpt2-conformance wire protocol (version 1). One file for Node (18 or newer), no npm package:
//
//     gpt2-conformance run --exec "node gpt2_wire.js"
//
//     h[b, t]  = wte[ids[b, t]] + wpe[past_length + t]      wte [50257, d], wpe [1024, d]
//     logits   = h_final @ wte^T                            the head is wte itself (tied)
//
// The suite writes requests to stdin and reads one response per request from stdout. A message
// is one line of JSON (the header) followed by the raw bytes of the arrays it lists; the suite's
// tables come as files of the shared-memory folder the hello offers. stdout carries the protocol
// only (anything for a human goes to stderr); the process ends at the end of stdin.
// The protocol: the package's wire/protocol-1.schema.json and docs/any-language.md.
'use strict';
const fs = require('fs');

const N_VOCAB = 50257, N_CTX = 1024;
const HEAD_ROWS = 64; // h rows kept in cache while every wte row meets them

// ---- reading stdin and writing stdout, synchronously ---------------------------------------
const pause = new Int32Array(new SharedArrayBuffer(4));
function retrying(io) { // a pipe the other side made non-blocking answers EAGAIN: wait and retry
  for (;;) {
    try { return io(); } catch (e) { if (e.code !== 'EAGAIN') throw e; Atomics.wait(pause, 0, 0, 1); }
  }
}
const inBuf = Buffer.alloc(1 << 16);
let inPos = 0, inLen = 0;
function fill() { inPos = 0; inLen = retrying(() => fs.readSync(0, inBuf, 0, inBuf.length, null)); return inLen > 0; }
function readLine() { // null at the end of stdin
  const parts = [];
  for (;;) {
    if (inPos === inLen && !fill()) return null;
    const nl = inBuf.indexOf(10, inPos);
    if (nl >= 0 && nl < inLen) { parts.push(inBuf.subarray(inPos, nl)); inPos = nl + 1; return Buffer.concat(parts).toString(); }
    parts.push(Buffer.from(inBuf.subarray(inPos, inLen))); inPos = inLen;
  }
}
function readExact(dst) { // dst: a Uint8Array, filled from stdin
  let got = Math.min(inLen - inPos, dst.length);
  dst.set(inBuf.subarray(inPos, inPos + got)); inPos += got;
  while (got < dst.length) {
    const n = retrying(() => fs.readSync(0, dst, got, dst.length - got, null));
    if (n === 0) throw new Error('the request ended inside an array');
    got += n;
  }
}
function writeAll(bytes) {
  for (let off = 0; off < bytes.length;) off += retrying(() => fs.writeSync(1, bytes, off, bytes.length - off));
}
const asBytes = (typed) => new Uint8Array(typed.buffer, typed.byteOffset, typed.byteLength);

// ---- arrays ----------------------------------------------------------------------------------
let shmDir = null; // the shared folder the hello offered
function readArray(desc) { // every array of a request is read, even one refused
  const bytes = new Uint8Array(new ArrayBuffer(desc.nbytes)); // aligned for any dtype
  if (desc.file) {
    const fd = fs.openSync(`${shmDir}/${desc.file}`, 'r');
    try { for (let got = 0; got < bytes.length;) got += fs.readSync(fd, bytes, got, bytes.length - got, null); }
    finally { fs.closeSync(fd); }
  } else readExact(bytes);
  return { ...desc, bytes };
}
const floats = (a) => new Float32Array(a.bytes.buffer, 0, a.nbytes / 4);
const shapeText = (shape) => (shape.length === 1 ? `(${shape[0]},)` : `(${shape.join(', ')})`);

class Refusal extends Error { constructor(kind, message) { super(message); this.kind = kind; } }
function checkFloat(a, shape, want) {
  if (a.dtype !== 'float32') throw new Refusal('TypeError', `${a.name}.dtype=${a.dtype}, but should be float32`);
  if (a.shape.length !== shape.length || a.shape.some((n, i) => shape[i] !== null && n !== shape[i]))
    throw new Refusal('ValueError', `${a.name}.shape=${shapeText(a.shape)}, but should be ${want}`);
  return floats(a);
}

// ---- the model -------------------------------------------------------------------------------
let d = 768, wte = null, wpe = null; // [N_VOCAB, d] and [N_CTX, d]

function pastLength(arg) {
  if (arg === undefined) return 0; // embed(ids): the default, 0
  if (arg.type === 'bool') throw new Refusal('TypeError', `past_length=${arg.value ? 'True' : 'False'} (bool) must be an integer >= 0`);
  if (arg.type !== 'int') throw new Refusal('TypeError', `past_length=${Number.isInteger(arg.value) ? arg.value.toFixed(1) : arg.value} (float) must be an integer >= 0`);
  if (arg.value < 0) throw new Refusal('ValueError', `past_length=${arg.value} must be >= 0`);
  return arg.value;
}

function checkedIds(ids, past) { // [B, T, the ids as numbers], each refusal naming the value and the rule
  if (ids.dtype !== 'int32' && ids.dtype !== 'int64') throw new Refusal('TypeError', `ids must be an integer array (int32 or int64), got dtype ${ids.dtype}`);
  if (ids.shape.length !== 2) throw new Refusal('ValueError', `ids must have rank 2 [B, T], got shape ${shapeText(ids.shape)}`);
  const [batch, seq] = ids.shape;
  if (seq > 0 && past + seq > N_CTX)
    throw new Refusal('PositionOutOfRange', `position ${Math.max(past, N_CTX)} is outside the wpe table [0, ${N_CTX}): past_length=${past} + T=${seq} tokens`);
  const raw = ids.dtype === 'int64' ? new BigInt64Array(ids.bytes.buffer, 0, batch * seq) : new Int32Array(ids.bytes.buffer, 0, batch * seq);
  const out = new Array(raw.length);
  for (let i = 0; i < raw.length; i++) {
    const id = raw[i];
    if (id < 0 || id >= N_VOCAB) // a BigInt prints exactly, however large
      throw new Refusal('TokenOutOfRange', `token id ${id} at ids[${Math.floor(i / seq)}, ${i % seq}] is outside the wte table [0, ${N_VOCAB})`);
    out[i] = Number(id);
  }
  return [batch, seq, out];
}

function embedInto(h, ids, seq, past) {
  for (let i = 0; i < ids.length; i++) {
    const row = ids[i] * d, pos = (past + (i % seq)) * d;
    for (let j = 0; j < d; j++) h[i * d + j] = wte[row + j] + wpe[pos + j]; // float32 sum: exact in double, rounded once
  }
}

const calls = {
  hello(req) {
    const config = req.config;
    if (config) {
      if (config.dtype !== 'float32') throw new Refusal('ValueError', `dtype ${config.dtype} is not claimed: float32 only`);
      d = config.n_embd;
      wte = new Float32Array(N_VOCAB * d); // zeros until load_tables or init_tables
      wpe = new Float32Array(N_CTX * d);
    }
    shmDir = req.shm || null;
    return [{
      protocol: 1, implementation: 'gpt2-wire-js', version: '1.0',
      capabilities: { dtypes: ['float32'], devices: ['cpu'], sizes: [768, 1024, 1280, 1600], kv_cache: true,
        tied_head: true, init: true, gradients: true, mutable_tables: true },
      errors: { TokenOutOfRange: 'IndexError', PositionOutOfRange: 'IndexError' },
      shm: shmDir !== null,
    }, []];
  },
  parameters: () => [{ parameters: { wte: [N_VOCAB, d], wpe: [N_CTX, d] } }, []],
  load_tables(req, [a, b]) {
    const newWte = checkFloat(a, [N_VOCAB, d], `(${N_VOCAB}, ${d})`), newWpe = checkFloat(b, [N_CTX, d], `(${N_CTX}, ${d})`);
    wte = newWte; wpe = newWpe; // the arrays just read are ours: no copy
    return [{}, []];
  },
  tables: () => [{}, [['wte', [N_VOCAB, d], wte], ['wpe', [N_CTX, d], wpe]]],
  embed(req, [ids]) {
    const past = pastLength(req.past_length);
    const [batch, seq, values] = checkedIds(ids, past);
    const h = new Float32Array(batch * seq * d);
    embedInto(h, values, seq, past);
    return [{}, [['h', [batch, seq, d], h]]];
  },
  logits(req, [a]) {
    const h = checkFloat(a, [null, null, d], `(B, T, ${d})`), n = h.length / d;
    const out = new Float32Array(n * N_VOCAB);
    for (let i0 = 0; i0 < n; i0 += HEAD_ROWS) { // a block of h rows stays in cache while every wte row meets it
      const i1 = Math.min(i0 + HEAD_ROWS, n);
      for (let r = 0; r < N_VOCAB; r++) {
        const w = wte.subarray(r * d, (r + 1) * d);
        for (let i = i0; i < i1; i++) {
          const x = h.subarray(i * d, (i + 1) * d);
          let s0 = 0, s1 = 0, s2 = 0, s3 = 0, j = 0; // four running sums, in double: rounded once, to float32
          for (; j + 4 <= d; j += 4) { s0 += x[j] * w[j]; s1 += x[j + 1] * w[j + 1]; s2 += x[j + 2] * w[j + 2]; s3 += x[j + 3] * w[j + 3]; }
          for (; j < d; j++) s0 += x[j] * w[j];
          out[i * N_VOCAB + r] = (s0 + s1) + (s2 + s3);
        }
      }
    }
    return [{}, [['logits', [a.shape[0], a.shape[1], N_VOCAB], out]]];
  },
  gradients(req, [ids, cotH, cotLogits]) {
    const past = pastLength(req.past_length);
    const [batch, seq, values] = checkedIds(ids, past);
    const ch = checkFloat(cotH, [batch, seq, d], '[B, T, d] as ids');
    const cl = checkFloat(cotLogits, [batch, seq, N_VOCAB], '[B, T, 50257] as ids');
    const n = batch * seq, h = new Float32Array(n * d), dh = Float64Array.from(ch);
    embedInto(h, values, seq, past);
    const gw = new Float32Array(N_VOCAB * d), gp = new Float32Array(N_CTX * d);
    for (let r = 0; r < N_VOCAB; r++) { // L = <ch, h> + <cl, h wte^T>: the head's two roles
      const w = wte.subarray(r * d, (r + 1) * d), g = gw.subarray(r * d, (r + 1) * d);
      for (let i = 0; i < n; i++) {
        const c = cl[i * N_VOCAB + r], x = h.subarray(i * d, (i + 1) * d), dx = dh.subarray(i * d, (i + 1) * d);
        if (c === 0) continue;
        for (let j = 0; j < d; j++) { dx[j] += c * w[j]; g[j] += c * x[j]; }
      }
    }
    for (let i = 0; i < n; i++) { // the gather's role: dL/dh back to the rows it read
      const row = values[i] * d, pos = (past + (i % seq)) * d;
      for (let j = 0; j < d; j++) { gw[row + j] += dh[i * d + j]; gp[pos + j] += dh[i * d + j]; }
    }
    return [{}, [['grad_wte', [N_VOCAB, d], gw], ['grad_wpe', [N_CTX, d], gp]]];
  },
  init_tables(req) {
    if (req.seed.type !== 'int') throw new Refusal('TypeError', 'seed must be an integer');
    let s = [0x9e3779b9, 0x243f6a88, 0xb7e15162, req.seed.value >>> 0].map((x, k) => (x ^ Math.imul(req.seed.value + k, 0x85ebca6b)) >>> 0);
    const next = () => { // xoshiro128**: 32 bits at a time
      const out = Math.imul(((Math.imul(s[1], 5) << 7) | (Math.imul(s[1], 5) >>> 25)), 9) >>> 0, t = s[1] << 9;
      s[2] ^= s[0]; s[3] ^= s[1]; s[1] ^= s[2]; s[0] ^= s[3]; s[2] ^= t; s[3] = (s[3] << 11) | (s[3] >>> 21);
      return out;
    };
    const uniform = () => ((next() >>> 5) * 67108864 + (next() >>> 6) + 0.5) / 9007199254740992; // 53 bits in (0, 1)
    for (const [table, std] of [[wte, 0.02], [wpe, 0.01]]) { // model(): N(0, 0.02^2), N(0, 0.01^2); Box-Muller
      for (let i = 0; i < table.length; i += 2) {
        const r = std * Math.sqrt(-2 * Math.log(uniform())), t = 2 * Math.PI * uniform();
        table[i] = r * Math.cos(t);
        if (i + 1 < table.length) table[i + 1] = r * Math.sin(t);
      }
    }
    return [{}, []];
  },
  assign_wte_row(req, [values]) {
    if (req.index.type !== 'int') throw new Refusal('TypeError', 'index must be an integer');
    const row = req.index.value;
    if (row < 0 || row >= N_VOCAB) throw new Refusal('IndexError', `row ${row} is outside the wte table [0, ${N_VOCAB})`);
    wte.set(checkFloat(values, [d], `(${d},)`), row * d);
    return [{}, []];
  },
};
const NEEDS = { load_tables: 2, gradients: 3, embed: 1, logits: 1, assign_wte_row: 1 };

// ---- the conversation --------------------------------------------------------------------------
for (let line; (line = readLine()) !== null;) {
  const req = JSON.parse(line);
  const arrays = (req.arrays || []).map(readArray);
  let head, outs = [];
  try {
    if (arrays.length < (NEEDS[req.call] || 0)) throw new Refusal('ValueError', `${req.call} needs ${NEEDS[req.call]} array(s), got ${arrays.length}`);
    if (!(req.call in calls)) throw new Refusal('ValueError', `unknown call ${req.call}`);
    [head, outs] = calls[req.call](req, arrays);
    head = { ok: true, ...head };
  } catch (e) {
    if (!(e instanceof Refusal)) throw e;
    head = { ok: false, error: { kind: e.kind, message: e.message } };
    outs = [];
  }
  if (outs.length) head.arrays = outs.map(([name, shape, data]) => ({ name, dtype: 'float32', shape, byteorder: 'little', nbytes: data.byteLength }));
  writeAll(Buffer.from(JSON.stringify(head) + '\n'));
  for (const [, , data] of outs) writeAll(asBytes(data)); // after the header, in the pipe
}
