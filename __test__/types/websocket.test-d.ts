// The WebSocket family typed as undici types it (types/websocket.d.ts): the constructor's
// second argument in its three forms, the attributes, typed handlers and events, ping(),
// WebSocketStream and WebSocketError, and the event classes.
import { expectAssignable, expectError, expectType } from 'tsd'
import {
  Agent,
  CloseEvent,
  ErrorEvent,
  MessageEvent,
  WebSocket,
  WebSocketError,
  WebSocketStream,
  ping,
  type BinaryType,
  type CloseEventInit,
  type WebSocketCloseInfo,
  type WebSocketInit,
} from '../../ts/index'

const ws = new WebSocket('ws://localhost/', ['chat'])
expectType<WebSocket>(new WebSocket(new URL('ws://localhost/')))
expectType<WebSocket>(new WebSocket('ws://localhost/', 'chat'))
expectType<WebSocket>(new WebSocket('ws://localhost/', { protocols: 'chat', dispatcher: new Agent(), headers: { authorization: 'x' } }))
expectAssignable<WebSocketInit>({ headers: [['a', 'b']] })
expectType<number>(ws.readyState)
expectType<number>(WebSocket.CLOSED)
expectType<number>(ws.OPEN)
expectType<number>(ws.bufferedAmount)
expectType<string>(ws.protocol)
expectType<string>(ws.extensions)
expectType<string>(ws.url)
expectType<BinaryType>(ws.binaryType)
ws.binaryType = 'arraybuffer'
ws.onmessage = (ev) => expectType<string>(ev.origin)
ws.onclose = (ev) => expectType<number>(ev.code)
ws.onerror = (ev) => expectType<Error>(ev.error)
ws.onopen = null
ws.addEventListener('close', (ev) => expectType<boolean>(ev.wasClean))
expectType<void>(ws.send('text'))
expectType<void>(ws.send(new Uint8Array(1)))
expectType<void>(ws.send(new ArrayBuffer(1)))
expectType<void>(ws.close(1000, 'bye'))
expectType<void>(ping(ws, Buffer.from('x')))
expectType<void>(ping(ws))
expectError(new WebSocket())
expectError(ws.send(5))
expectError((ws.url = 'x'))

expectType<string>(new MessageEvent('message', { data: 'x', origin: 'o' }).origin)
expectType<number>(new MessageEvent<number>('message', { data: 1 }).data)
expectType<number>(new CloseEvent('close', { code: 1000, reason: 'r', wasClean: true }).code)
expectAssignable<CloseEventInit>({ code: 1000 })
expectType<string>(new ErrorEvent('error', { message: 'm', error: new Error('e') }).message)

const stream = new WebSocketStream('ws://localhost/', { protocols: ['chat'], signal: AbortSignal.timeout(10) })
expectType<Promise<WebSocketCloseInfo>>(stream.closed)
expectType<string>(stream.url)
void stream.opened.then(({ readable, writable, protocol, extensions }) => {
  expectType<string>(protocol)
  expectType<string>(extensions)
  void [readable, writable]
})
expectType<void>(stream.close({ closeCode: 1000, reason: 'bye' }))
expectType<number>(new WebSocketError('m', { closeCode: 1000, reason: '' }).closeCode)
