// A FormData body as multipart/form-data (the HTML standard's encoding), with its length known
// before anything is read: undici sends FormData with a content-length, not chunked.

import { randomBytes } from 'node:crypto'

/** The entries a FormData yields: string values, or Files (Blobs with a name). */
export type FormEntries = Iterable<[string, string | Blob]>

export interface EncodedForm {
  type: string
  length: number
  parts: AsyncIterable<Uint8Array>
}

const encoder = new TextEncoder()
const CRLF = encoder.encode('\r\n')

/** Line breaks of names and string values go as CRLF (the entry list's normalization). */
const crlf = (s: string): string => s.replace(/\r\n|\r|\n/g, '\r\n')

/** A name or filename inside a quoted header parameter. */
const escapeParam = (s: string): string => s.replace(/\n/g, '%0A').replace(/\r/g, '%0D').replace(/"/g, '%22')

export function encodeFormData(form: FormEntries): EncodedForm {
  const boundary = `----saetta-formdata-${randomBytes(16).toString('hex')}`
  // Files of another realm or copy (undici's own) are Blob-like, not always `instanceof Blob`.
  const parts: Array<Uint8Array | Blob> = []
  let length = 0
  const add = (part: Uint8Array | Blob): void => {
    parts.push(part)
    length += part instanceof Uint8Array ? part.byteLength : part.size
  }
  for (const [name, value] of form) {
    let head = `--${boundary}\r\nContent-Disposition: form-data; name="${escapeParam(crlf(name))}"`
    if (typeof value === 'string') {
      add(encoder.encode(`${head}\r\n\r\n${crlf(value)}\r\n`))
      continue
    }
    const filename = (value as Blob & { name?: string }).name
    if (filename) head += `; filename="${escapeParam(filename)}"`
    add(encoder.encode(`${head}\r\nContent-Type: ${value.type || 'application/octet-stream'}\r\n\r\n`))
    add(value)
    add(CRLF)
  }
  add(encoder.encode(`--${boundary}--\r\n`))
  return {
    type: `multipart/form-data; boundary=${boundary}`,
    length,
    parts: (async function* () {
      for (const part of parts) {
        if (part instanceof Uint8Array) yield part
        else yield* part.stream() as unknown as AsyncIterable<Uint8Array>
      }
    })(),
  }
}
