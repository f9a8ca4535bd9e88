// Local WebSocket origin for `npm run bench`'s WebSocket rows: a `ws` server that echoes every
// message as it came (text as text, binary as binary), without permessage-deflate (the rows
// measure framing and the crossing, not zlib). Forked by run.mjs; listens on 127.0.0.1:0 and
// reports { port } over IPC.
import { WebSocketServer } from 'ws'

const server = new WebSocketServer({ host: '127.0.0.1', port: 0, perMessageDeflate: false, maxPayload: 0 })
server.on('connection', (socket) => {
  socket.on('error', () => {})
  socket.on('message', (data, binary) => socket.send(data, { binary }))
})
server.on('listening', () => process.send({ port: server.address().port }))
process.on('disconnect', () => process.exit(0))
process.on('SIGTERM', () => process.exit(0))
