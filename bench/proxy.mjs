// The HTTP proxy of `npm run bench`'s proxy rows (the `proxy` package: requests forwarded,
// and CONNECT tunnels). Forked by run.mjs like server.mjs; listens on 127.0.0.1:0, reports
// { port } over IPC, and exits when the parent goes away.
import http from 'node:http'
import { createProxy } from 'proxy'

const server = createProxy(http.createServer())
server.keepAliveTimeout = 60_000
server.headersTimeout = 61_000
server.requestTimeout = 0
// Clients under test may reset sockets on close; that is not a proxy failure.
server.on('clientError', (_err, socket) => socket.destroy())

server.listen(0, '127.0.0.1', () => {
  const { port } = server.address()
  if (process.send) process.send({ port })
  else console.log(`bench proxy listening on http://127.0.0.1:${port}`)
})

process.on('disconnect', () => process.exit(0))
process.on('SIGTERM', () => process.exit(0))
process.on('SIGINT', () => process.exit(0))
