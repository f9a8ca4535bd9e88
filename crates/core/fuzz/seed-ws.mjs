// Writes the WebSocket targets' seeds: server frames as RFC 6455 and 7692 make them, deflated
// with node:zlib. `node crates/core/fuzz/seed-ws.mjs` (rewrites seeds/ws_*; the output is the
// same each run). Each seed starts with the target's option bytes (see src/ws.rs):
// `ws_frames` = deflate config, limits, piece size, then the wire; `ws_deflate` = deflate
// config, limits, piece size, then records [flags, length, payload].
import { createHash } from 'node:crypto'
import { mkdirSync, rmSync, writeFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import zlib from 'node:zlib'

const here = dirname(fileURLToPath(import.meta.url))

// ws_frames' config bytes.
const PLAIN = 0
const DEFLATE = 2
const NO_CONTEXT = 3
const BITS_9 = 5
const BAD_WINDOW = 7
const NO_LIMIT = 0
const limit = { 16: 2, 125: 3, 1024: 4, 4096: 5, 65536: 6, '1MiB': 7 }
const fragments = { 1: 1 << 3, 2: 2 << 3, 8: 3 << 3 }

const FIN = 0x80
const RSV1 = 0x40
const op = { cont: 0, text: 1, binary: 2, close: 8, ping: 9, pong: 10 }

/** An unmasked frame as a server sends it; `wide` forces the 64-bit length. */
function frame(b0, payload, wide = false) {
  const data = Buffer.from(payload)
  let head
  if (wide || data.length > 0xffff) {
    head = Buffer.alloc(10)
    head[1] = 127
    head.writeBigUInt64BE(BigInt(data.length), 2)
  } else if (data.length > 125) {
    head = Buffer.alloc(4)
    head[1] = 126
    head.writeUInt16BE(data.length, 2)
  } else {
    head = Buffer.from([0, data.length])
  }
  head[0] = b0
  return Buffer.concat([head, data])
}

const close = (code, reason = '') => {
  const body = Buffer.alloc(2)
  body.writeUInt16BE(code)
  return frame(FIN | op.close, Buffer.concat([body, Buffer.from(reason)]))
}

/** A server's deflater kept across messages (context takeover): each message tail-stripped. */
function deflater(options = {}) {
  const z = zlib.createDeflateRaw(options)
  const chunks = []
  z.on('data', (d) => chunks.push(d))
  return (data) =>
    new Promise((resolve) => {
      z.write(Buffer.from(data))
      z.flush(zlib.constants.Z_SYNC_FLUSH, () => {
        const out = Buffer.concat(chunks.splice(0))
        if (!out.subarray(-4).equals(Buffer.from([0, 0, 0xff, 0xff]))) throw new Error('no tail')
        resolve(out.subarray(0, -4))
      })
    })
}

const TAIL = Buffer.from([0, 0, 0xff, 0xff])
const zeros = (n) => Buffer.alloc(n)
const words = (n) => Buffer.from(Array.from({ length: n }, (_, i) => `word${i % 37} `).join('').slice(0, n))

const seeds = { ws_frames: [], ws_deflate: [] }
const add = (target, prefix, ...parts) => seeds[target].push(Buffer.concat([Buffer.from(prefix), ...parts.map((p) => Buffer.from(p))]))

// ---- ws_frames ----

add('ws_frames', [PLAIN, NO_LIMIT, 7],
  frame(FIN | op.text, 'hello'),
  frame(FIN | op.binary, [1, 2, 3]),
  frame(FIN | op.binary, zeros(300)),
  frame(FIN | op.binary, [9, 9], true),
  frame(FIN | op.text, ''),
  frame(FIN | op.ping, 'ping'),
  frame(FIN | op.pong, 'pong'),
  close(1000, 'bye'))
add('ws_frames', [PLAIN, NO_LIMIT, 3],
  frame(op.text, 'hel'),
  frame(FIN | op.ping, 'p'),
  frame(op.cont, ''),
  frame(op.cont, 'lo '),
  frame(FIN | op.pong, 'q'),
  frame(FIN | op.cont, 'wörld'),
  frame(op.binary, ''),
  frame(FIN | op.cont, [1, 2]),
  frame(op.text, [0xe2]),
  frame(FIN | op.cont, [0x82, 0xac]),
  frame(FIN | op.text, '\u{FEFF}\u{FEFF}bom'),
  close(4000, '\u{FEFF}reason ✓'))
add('ws_frames', [PLAIN, limit[125], 11], frame(FIN | op.binary, zeros(125)), frame(op.binary, zeros(100)), frame(FIN | op.cont, zeros(26)))
add('ws_frames', [PLAIN, limit[16] | fragments[2], 5], frame(op.text, 'a'), frame(op.cont, 'b'), frame(FIN | op.cont, 'c'))
add('ws_frames', [PLAIN, NO_LIMIT, 2], frame(FIN | op.text, [0xff, 0xfe]))
add('ws_frames', [PLAIN, NO_LIMIT, 2], close(1005))
add('ws_frames', [PLAIN, NO_LIMIT, 2], frame(FIN | op.text, 'a'), Buffer.from([0x81, 0x82, 1, 2, 3, 4, 0x69, 0x6b]))
add('ws_frames', [PLAIN, NO_LIMIT, 2], frame(FIN | 3, 'reserved opcode'))
add('ws_frames', [PLAIN, NO_LIMIT, 4], Buffer.from([0x82, 127, 0x80, 0, 0, 0, 0, 0, 0, 0]))

{
  const z = deflater()
  const msg = words(2000)
  const first = await z(msg)
  const second = await z(msg)
  const part1 = await z(words(700))
  const part2 = await z('and the end of it')
  add('ws_frames', [DEFLATE, NO_LIMIT, 9],
    frame(FIN | RSV1 | op.text, first),
    frame(FIN | op.text, 'plain between'),
    frame(FIN | RSV1 | op.binary, second),
    frame(RSV1 | op.text, Buffer.concat([part1, TAIL]).subarray(0, 40)),
    frame(FIN | op.ping, ''),
    frame(op.cont, Buffer.concat([part1, TAIL]).subarray(40)),
    frame(FIN | op.cont, part2),
    frame(FIN | RSV1 | op.text, [0x00]),
    frame(FIN | RSV1 | op.text, []),
    close(1001))
}
{
  // Each message on its own window, and a message ended with a final block (BFINAL).
  const one = (data) => zlib.deflateRawSync(Buffer.from(data), { finishFlush: zlib.constants.Z_SYNC_FLUSH }).subarray(0, -4)
  const final = zlib.deflateRawSync(Buffer.from('final block'))
  add('ws_frames', [NO_CONTEXT, limit[4096], 13],
    frame(FIN | RSV1 | op.text, one('no context kept')),
    frame(FIN | RSV1 | op.binary, one(words(500))),
    frame(FIN | RSV1 | op.text, final),
    frame(FIN | RSV1 | op.text, one('after a final block')))
  add('ws_frames', [BITS_9, NO_LIMIT, 17],
    frame(FIN | RSV1 | op.binary, zlib.deflateRawSync(words(3000), { windowBits: 9, finishFlush: zlib.constants.Z_SYNC_FLUSH }).subarray(0, -4)))
  add('ws_frames', [DEFLATE, NO_LIMIT, 3], frame(FIN | RSV1 | op.text, one(Buffer.from([0xc3, 0x28]))))
  add('ws_frames', [DEFLATE, NO_LIMIT, 3], frame(FIN | RSV1 | op.binary, [0xff, 0xff, 0xff]))
  add('ws_frames', [BAD_WINDOW, NO_LIMIT, 3], frame(FIN | op.text, 'plain'), frame(FIN | RSV1 | op.text, one('x')))
  // A bomb: 1 MiB of zeros in about a kilobyte, over a 64 KiB limit; and over its own
  // frame's limit after a fragment.
  add('ws_frames', [DEFLATE, limit[65536], 0], frame(FIN | RSV1 | op.binary, one(zeros(1 << 20))))
  const z = deflater()
  add('ws_frames', [DEFLATE, limit[1024] | fragments[8], 31],
    frame(RSV1 | op.binary, Buffer.concat([await z(zeros(800)), TAIL])),
    frame(op.cont, Buffer.concat([await z(zeros(800)), TAIL])),
    frame(FIN | op.cont, await z(zeros(100))))
  add('ws_frames', [DEFLATE, limit['1MiB'] | fragments[1], 64],
    frame(RSV1 | op.text, Buffer.concat([await z('one'), TAIL])),
    frame(FIN | op.cont, await z('two')))
}

// ---- ws_deflate ----

/** A record of ws_deflate: flags (bit 0 FIN, 1 text, 2 uncompressed, 3 ping), length, payload. */
const record = (flags, payload) => {
  const data = Buffer.from(payload)
  if (data.length > 255) throw new Error('record too long')
  return Buffer.concat([Buffer.from([flags, data.length]), data])
}
const R = { FIN: 1, TEXT: 2, PLAIN: 4, PING: 8 }
{
  const z = deflater()
  const msg = words(600)
  add('ws_deflate', [0, NO_LIMIT, 5],
    record(R.FIN | R.TEXT, await z(msg)),
    record(R.FIN | R.TEXT, await z(msg)),
    record(R.FIN | R.PLAIN, 'plain'),
    record(R.FIN, await z(Buffer.from([0, 1, 2, 3, 255]))))
  const part = Buffer.concat([await z(words(300)), TAIL])
  add('ws_deflate', [0, limit[4096], 7],
    record(R.TEXT, part.subarray(0, 20)),
    record(R.PING, 'between'),
    record(0, part.subarray(20)),
    record(R.FIN, await z(' the end')))
  add('ws_deflate', [1, limit[1024], 0], record(R.FIN, zlib.deflateRawSync(zeros(64 << 10), { finishFlush: zlib.constants.Z_SYNC_FLUSH }).subarray(0, -4)))
  add('ws_deflate', [0, NO_LIMIT, 3], record(R.FIN | R.TEXT, zlib.deflateRawSync(Buffer.from('final block'))), record(R.FIN | R.TEXT, await deflater()('next stream')))
  add('ws_deflate', [0x28, limit[1024] | fragments[2], 1],
    record(R.TEXT, Buffer.concat([await z('a'), TAIL])),
    record(0, Buffer.concat([await z('b'), TAIL])),
    record(R.FIN, await z('c')))
  add('ws_deflate', [0x10, NO_LIMIT, 2], record(R.FIN | R.TEXT, [0x00]), record(R.FIN, []), record(R.FIN | R.TEXT, [0xff, 0xff]))
}

for (const [target, list] of Object.entries(seeds)) {
  const dir = join(here, 'seeds', target)
  rmSync(dir, { recursive: true, force: true })
  mkdirSync(dir, { recursive: true })
  for (const seed of list) {
    if (seed.length > 8192) throw new Error(`${target} seed of ${seed.length} bytes`)
    writeFileSync(join(dir, createHash('sha1').update(seed).digest('hex').slice(0, 16)), seed)
  }
  console.log(`${target}: ${list.length} seeds`)
}
