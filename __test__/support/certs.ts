// Certificates made at run time with the openssl command line: a CA, a server certificate it
// signs (localhost and 127.0.0.1), a self-signed one, and a client certificate for mutual TLS.
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { execFileSync } from 'node:child_process'

export interface Certs {
  dir: string
  ca: Buffer
  serverCert: Buffer
  serverKey: Buffer
  selfCert: Buffer
  selfKey: Buffer
  clientCert: Buffer
  clientKey: Buffer
  /** A second CA that signed nothing here: trusting it alone trusts none of the above. */
  otherCa: Buffer
}

function openssl(dir: string, args: string[]): void {
  try {
    execFileSync('openssl', args, { cwd: dir, stdio: ['ignore', 'ignore', 'pipe'] })
  } catch (err) {
    throw new Error(`openssl ${args.join(' ')} failed (the TLS tests need the openssl command): ${(err as Error).message}`)
  }
}

const EC = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes']

/** Makes a fresh set in a temporary directory. */
export function makeCerts(): Certs {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'saetta-certs-'))
  const ca = (name: string, cn: string): void =>
    openssl(dir, ['req', '-x509', ...EC, '-keyout', `${name}.key`, '-out', `${name}.pem`, '-days', '2', '-subj', `/CN=${cn}`])
  const signed = (name: string, cn: string, ext: string): void => {
    openssl(dir, ['req', ...EC, '-keyout', `${name}.key`, '-out', `${name}.csr`, '-subj', `/CN=${cn}`])
    fs.writeFileSync(path.join(dir, `${name}.ext`), ext)
    openssl(dir, [
      'x509',
      '-req',
      '-in',
      `${name}.csr`,
      '-CA',
      'ca.pem',
      '-CAkey',
      'ca.key',
      '-CAcreateserial',
      '-out',
      `${name}.pem`,
      '-days',
      '2',
      '-extfile',
      `${name}.ext`,
    ])
  }
  ca('ca', 'saetta test CA')
  ca('other', 'saetta other CA')
  signed('server', 'localhost', 'subjectAltName=DNS:localhost,IP:127.0.0.1\n')
  signed('client', 'saetta client', 'extendedKeyUsage=clientAuth\n')
  openssl(dir, [
    'req',
    '-x509',
    ...EC,
    '-keyout',
    'self.key',
    '-out',
    'self.pem',
    '-days',
    '2',
    '-subj',
    '/CN=localhost',
    '-addext',
    'subjectAltName=DNS:localhost',
  ])
  const read = (f: string): Buffer => fs.readFileSync(path.join(dir, f))
  return {
    dir,
    ca: read('ca.pem'),
    serverCert: read('server.pem'),
    serverKey: read('server.key'),
    selfCert: read('self.pem'),
    selfKey: read('self.key'),
    clientCert: read('client.pem'),
    clientKey: read('client.key'),
    otherCa: read('other.pem'),
  }
}
