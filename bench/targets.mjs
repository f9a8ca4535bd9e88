// Bench rows. Each row is { name, lib, api, setup(origin), close() } where setup returns
// `once()`: issue one GET and resolve with the number of body bytes consumed.
import http from 'node:http'

// request(): the high-level API; the body stream is drained chunk by chunk.
function requestRow (name, lib, Client, path, concurrency) {
  let client
  return {
    name,
    lib,
    api: 'request',
    setup (origin) {
      client = new Client(origin, { pipelining: concurrency })
      const opts = { path, method: 'GET' }
      return async function once () {
        const { statusCode, body } = await client.request(opts)
        let n = 0
        for await (const chunk of body) n += chunk.length
        if (statusCode !== 200) throw new Error(`${name}: status ${statusCode}`)
        return n
      }
    },
    async close () {
      if (client && !client.closed) await client.close()
    },
    destroy () {
      if (client && !client.destroyed) client.destroy()
    }
  }
}

// dispatch(): the raw handler interface, with the least work a handler can do.
function dispatchRow (name, lib, Client, path, concurrency) {
  let client
  return {
    name,
    lib,
    api: 'dispatch',
    setup (origin) {
      client = new Client(origin, { pipelining: concurrency })
      const opts = { path, method: 'GET' }
      return function once () {
        return new Promise((resolve, reject) => {
          let n = 0
          let status = 0
          client.dispatch(opts, {
            onConnect () {},
            onHeaders (statusCode) {
              status = statusCode
              return true
            },
            onData (chunk) {
              n += chunk.length
              return true
            },
            onComplete () {
              if (status !== 200) reject(new Error(`${name}: status ${status}`))
              else resolve(n)
            },
            onError: reject
          })
        })
      }
    },
    async close () {
      if (client && !client.closed) await client.close()
    },
    destroy () {
      if (client && !client.destroyed) client.destroy()
    }
  }
}

function nodeHttpRow (path, concurrency) {
  let agent
  return {
    name: 'node:http',
    lib: 'node',
    api: 'request',
    setup (origin) {
      const url = new URL(origin)
      agent = new http.Agent({ keepAlive: true, maxSockets: concurrency })
      const opts = { agent, host: url.hostname, port: url.port, path, method: 'GET' }
      return function once () {
        return new Promise((resolve, reject) => {
          const req = http.request(opts, (res) => {
            let n = 0
            res.on('data', (chunk) => { n += chunk.length })
            res.on('end', () => {
              if (res.statusCode !== 200) reject(new Error(`node:http: status ${res.statusCode}`))
              else resolve(n)
            })
            res.on('error', reject)
          })
          req.on('error', reject)
          req.end()
        })
      }
    },
    async close () {
      if (agent) agent.destroy()
    },
    destroy () {
      if (agent) agent.destroy()
    }
  }
}

// Rows in display order; `libs` maps a target name to its module (or undefined if not run).
export function makeRows ({ saetta, undici, node }, { path, concurrency }) {
  const rows = []
  if (saetta) {
    rows.push(requestRow('saetta request', 'saetta', saetta.Client, path, concurrency))
    rows.push(dispatchRow('saetta dispatch', 'saetta', saetta.Client, path, concurrency))
  }
  if (undici) {
    rows.push(requestRow('undici request', 'undici', undici.Client, path, concurrency))
    rows.push(dispatchRow('undici dispatch', 'undici', undici.Client, path, concurrency))
  }
  if (node) rows.push(nodeHttpRow(path, concurrency))
  return rows
}

// The undici row each row is compared against.
export function baselineOf (row) {
  if (row.lib === 'undici') return null
  return row.api === 'dispatch' ? 'undici dispatch' : 'undici request'
}
