// The raw origin of `npm run bench` (--mode=raw): a few lines of node:net that answer each
// request head with a precomputed response, so that the origin is not what bounds a row (a
// node:http server spends more per request than the clients measured against it). Two
// listeners: one with setNoDelay(true) (the rows), one without (Nagle's algorithm on: the
// row that shows what a client's write pattern costs against such a server). Forked by
// run.mjs; reports { port, nagle } (the second listener's port) over IPC.
//   GET /?size=N   a 200 response with N body bytes (default 65536)
import net from 'node:net'

const responses = new Map()
function responseOf(size) {
  let r = responses.get(size)
  if (r === undefined) {
    const head = `HTTP/1.1 200 OK\r\ncontent-type: application/octet-stream\r\ncontent-length: ${size}\r\nkeep-alive: timeout=600\r\n\r\n`
    r = Buffer.concat([Buffer.from(head, 'latin1'), Buffer.alloc(size, 'saetta-bench-')])
    responses.set(size, r)
  }
  return r
}

/** Answers every whole request head in what `socket` reads (requests have no body). */
function serve(socket) {
  socket.on('error', () => {})
  let pending = ''
  socket.setEncoding('latin1')
  socket.on('data', (text) => {
    pending += text
    // The answers to what one read brought go in one write, as a server answering a pipeline does.
    const answers = []
    let end
    while ((end = pending.indexOf('\r\n\r\n')) !== -1) {
      const head = pending.slice(0, end)
      pending = pending.slice(end + 4)
      const target = head.slice(head.indexOf(' ') + 1, head.indexOf(' HTTP/'))
      const q = target.indexOf('size=')
      answers.push(responseOf(q === -1 ? 65536 : parseInt(target.slice(q + 5), 10)))
    }
    for (const a of answers) socket.write(a)
  })
}

const listen = (server) => new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(server.address().port)))
const port = await listen(net.createServer({ noDelay: true }, serve))
const nagle = await listen(net.createServer(serve))
process.send({ port, nagle })
process.on('disconnect', () => process.exit(0))
process.on('SIGTERM', () => process.exit(0))
