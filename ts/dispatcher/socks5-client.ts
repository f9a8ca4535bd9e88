// The SOCKS5 handshake over a socket that lives in JS: the way Socks5ProxyAgent's tunnels are
// made where the engine cannot make them (a caller's connector to the proxy, TLS options only
// Node's TLS has). The engine's own handshake (crates/core/src/transport/socks5.rs) is the
// model: the same messages, errors and phases.

import net from 'node:net'
import type { Duplex } from 'node:stream'
import { ConnectTimeoutError, InvalidArgumentError, SocketError, Socks5ProxyError } from '../errors'

export interface Socks5Target {
  /** An IP literal (an IPv6 one without brackets), or a name the proxy resolves. */
  host: string
  port: number
  username?: Buffer
  password?: Buffer
  /**
   * undici 8's waits: each phase within `ms` (none when 0), a ConnectTimeoutError naming the
   * proxy while it authenticates and the target after; null: undici 7.30's (5 s, plain Errors).
   */
  timeouts?: { ms: number; proxy: string; target: string } | null
}

/** As undici: each wait for the proxy lasts at most this long. */
const PHASE_MS = 5000

const REPLIES = [
  '',
  'General SOCKS server failure',
  'Connection not allowed by ruleset',
  'Network unreachable',
  'Host unreachable',
  'Connection refused',
  'TTL expired',
  'Command not supported',
  'Address type not supported',
]

const refused = (code: string, message: string): Error => new Socks5ProxyError(message, `UND_ERR_SOCKS5_${code}`)

/** Reads a socket's bytes as they are asked for; what is left goes back to the socket. */
class Reader {
  #socket: Duplex
  #buf = Buffer.alloc(0)
  #ended = false
  #failed: Error | null = null
  #wake: (() => void) | null = null

  constructor(socket: Duplex) {
    this.#socket = socket
    socket.on('data', this.#onData).on('end', this.#onEnd).on('close', this.#onEnd).on('error', this.#onError)
  }

  #onData = (chunk: Buffer): void => {
    this.#buf = Buffer.concat([this.#buf, chunk])
    this.#wake?.()
  }

  #onEnd = (): void => {
    this.#ended = true
    this.#wake?.()
  }

  #onError = (err: Error): void => {
    this.#failed = err
    this.#wake?.()
  }

  /** Up to `n` bytes: fewer only when the socket ended first. */
  async upTo(n: number): Promise<Buffer> {
    while (this.#buf.length < n && !this.#ended && this.#failed === null) {
      await new Promise<void>((resolve) => (this.#wake = resolve))
      this.#wake = null
    }
    if (this.#failed !== null) throw this.#failed
    const out = this.#buf.subarray(0, n)
    this.#buf = this.#buf.subarray(out.length)
    return out
  }

  async exact(n: number): Promise<Buffer> {
    const out = await this.upTo(n)
    if (out.length < n) throw new SocketError('other side closed', null)
    return out
  }

  /** Stops reading; bytes read past the handshake are the tunnel's. */
  release(): void {
    this.#socket.off('data', this.#onData).off('end', this.#onEnd).off('close', this.#onEnd).off('error', this.#onError)
    if (this.#buf.length > 0) this.#socket.unshift(this.#buf)
  }
}

function within<T>(p: Promise<T>, ms: number, timedOut: () => Error): Promise<T> {
  if (ms === 0) return p
  let timer: NodeJS.Timeout | undefined
  const late = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(timedOut()), ms)))
  return Promise.race([p, late]).finally(() => clearTimeout(timer))
}

const connectTimeout = (address: string, ms: number) => (): Error =>
  new ConnectTimeoutError(`Connect Timeout Error (attempted address: ${address}, timeout: ${ms}ms)`)

/** Opens the tunnel to `target` over `socket` (connected to the proxy). */
export async function socks5Handshake(socket: Duplex, target: Socks5Target): Promise<void> {
  const reader = new Reader(socket)
  try {
    const auth = target.username && target.password ? { user: target.username, password: target.password } : null
    socket.write(Buffer.from(auth ? [5, 2, 2, 0] : [5, 1, 0]))
    const t = target.timeouts
    await within(
      authenticate(socket, reader, auth),
      t ? t.ms : PHASE_MS,
      t ? connectTimeout(t.proxy, t.ms) : () => new Error('SOCKS5 authentication timeout'),
    )
    socket.write(connectRequest(target))
    await within(reply(reader), t ? t.ms : PHASE_MS, t ? connectTimeout(t.target, t.ms) : () => new Error('SOCKS5 connection timeout'))
  } finally {
    reader.release()
  }
}

async function authenticate(socket: Duplex, reader: Reader, auth: { user: Buffer; password: Buffer } | null): Promise<void> {
  const [version, method] = await reader.exact(2)
  if (version !== 5) throw refused('VERSION', `Invalid SOCKS version: ${version}`)
  if (method === 0xff) throw refused('AUTH_REJECTED', 'No acceptable authentication method')
  if (method === 0) return
  if (method !== 2) throw refused('AUTH_METHOD', `Unsupported authentication method: ${method}`)
  if (auth === null) throw new InvalidArgumentError('Username and password required for authentication')
  if (auth.user.length > 255 || auth.password.length > 255) throw new InvalidArgumentError('Username or password too long')
  socket.write(Buffer.concat([Buffer.from([1, auth.user.length]), auth.user, Buffer.from([auth.password.length]), auth.password]))
  const [subVersion, status] = await reader.exact(2)
  if (subVersion !== 1) throw refused('AUTH_VERSION', `Invalid auth sub-negotiation version: ${subVersion}`)
  if (status !== 0) throw refused('AUTH_FAILED', 'Authentication failed')
}

/** CONNECT to the target: an IP literal as such, anything else as a domain name. */
function connectRequest({ host, port }: Socks5Target): Buffer {
  let address: Buffer
  if (net.isIPv4(host)) address = Buffer.from([1, ...host.split('.').map(Number)])
  else if (net.isIPv6(host)) address = Buffer.concat([Buffer.from([4]), ipv6Bytes(host)])
  else {
    const name = Buffer.from(host)
    if (name.length > 255) throw new InvalidArgumentError('Domain name too long (max 255 bytes)')
    address = Buffer.concat([Buffer.from([3, name.length]), name])
  }
  const portBytes = Buffer.alloc(2)
  portBytes.writeUInt16BE(port)
  return Buffer.concat([Buffer.from([5, 1, 0]), address, portBytes])
}

/** The 16 bytes of an IPv6 address (a valid one: net.isIPv6 said so). */
function ipv6Bytes(host: string): Buffer {
  let text = host.replace(/%.*$/, '')
  // An IPv4 tail (`::ffff:1.2.3.4`) as the two groups it is.
  const v4 = /(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(text)
  if (v4) {
    const [a, b, c, d] = v4.slice(1).map(Number)
    text = `${text.slice(0, v4.index)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`
  }
  const [head, tail] = text.split('::')
  const first = head ? head.split(':') : []
  const last = tail ? tail.split(':') : []
  // `::` stands for the groups left out.
  const groups = tail === undefined ? first : [...first, ...Array<string>(8 - first.length - last.length).fill('0'), ...last]
  const out = Buffer.alloc(16)
  groups.forEach((g, i) => out.writeUInt16BE(parseInt(g, 16), i * 2))
  return out
}

async function reply(reader: Reader): Promise<void> {
  const head = await reader.upTo(4)
  const [version, code, , addressType] = head
  if (head.length >= 1 && version !== 5) throw refused('REPLY_VERSION', `Invalid SOCKS version in reply: ${version}`)
  const failure = (): Error => refused(`REPLY_${code}`, `SOCKS5 connection failed: ${REPLIES[code] || `Unknown error code: ${code}`}`)
  // Some proxies send just the version and the code of a failure, and close.
  if (head.length < 4) throw head.length >= 2 && code !== 0 ? failure() : new SocketError('other side closed', null)
  let rest: number
  if (addressType === 1) rest = 4 + 2
  else if (addressType === 4) rest = 16 + 2
  else if (addressType === 3) rest = (await reader.exact(1))[0] + 2
  else throw refused('ADDR_TYPE', `Invalid address type in reply: ${addressType}`)
  const complete = (await reader.upTo(rest)).length === rest
  if (code !== 0) throw failure()
  if (!complete) throw new SocketError('other side closed', null)
}
