/**
 * Receipts (plugins/receipt/receipts.ts): what verifies, and the forgeries that must not — an altered payload,
 * another key under the same kid, `alg: none`, an HMAC token keyed with the public key (algorithm
 * confusion), an unknown kid, malformed tokens. Key material read in every accepted form.
 */
import t from 'tap'
import { createHmac, generateKeyPairSync, randomBytes } from 'node:crypto'
import { signingKeyFrom, signReceipt, verifyReceipt, type ReceiptPayload } from '../../../plugins/receipt/receipts.ts'

const seed = randomBytes(32)
const key = signingKeyFrom(seed.toString('hex'), 'k1')
const jwks = { keys: [key.publicJwk] }
const payload: ReceiptPayload = { network: 'eip155:84532', resourceUrl: 'http://h/r', payer: '0xabc', issuedAt: 1_800_000_000, amount: '7000', asset: '0xtoken', requestId: 'req-1' }
const b64 = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64url')

t.test('a receipt verifies, with its payload and kid', async (t) => {
  const jws = signReceipt(key, payload)
  t.same(verifyReceipt(jws, jwks), { ok: true, kid: 'k1', payload })
  t.same(JSON.parse(Buffer.from(jws.split('.')[0], 'base64url').toString()), { alg: 'EdDSA', kid: 'k1', typ: 'x402-receipt+jws' })
})

t.test('the key is read as hex seed, base64url seed or PKCS#8 PEM, all the same key', async (t) => {
  const pem = key.privateKey.export({ format: 'pem', type: 'pkcs8' }).toString()
  t.equal(signingKeyFrom(seed.toString('base64url'), 'k1').publicJwk.x, key.publicJwk.x)
  t.equal(signingKeyFrom(pem, 'k1').publicJwk.x, key.publicJwk.x)
  t.throws(() => signingKeyFrom('too-short', 'k1'), /not an Ed25519 key/)
  const rsa = generateKeyPairSync('rsa', { modulusLength: 1024 }).privateKey.export({ format: 'pem', type: 'pkcs8' }).toString()
  t.throws(() => signingKeyFrom(rsa, 'k1'), /rsa, not Ed25519/)
  try {
    signingKeyFrom(seed.toString('hex').slice(0, 60), 'k1')
  } catch (error) {
    t.notMatch((error as Error).message, seed.toString('hex').slice(0, 20), 'the error never quotes the key')
  }
})

t.test('forgeries are refused', async (t) => {
  const [head, body, sig] = signReceipt(key, payload).split('.')
  const altered = `${head}.${b64({ ...payload, amount: '1' })}.${sig}`
  t.match(verifyReceipt(altered, jwks), { ok: false, reason: /bad signature/ })

  const other = signingKeyFrom(randomBytes(32).toString('hex'), 'k1')
  t.match(verifyReceipt(signReceipt(other, payload), jwks), { ok: false, reason: /bad signature/ }, 'another key under the same kid')

  t.match(verifyReceipt(`${b64({ alg: 'none', kid: 'k1' })}.${body}.`, jwks), { ok: false, reason: /alg must be EdDSA/ })
  const hsHead = b64({ alg: 'HS256', kid: 'k1' })
  const hmac = createHmac('sha256', key.publicJwk.x).update(`${hsHead}.${body}`).digest('base64url')
  t.match(verifyReceipt(`${hsHead}.${body}.${hmac}`, jwks), { ok: false, reason: /alg must be EdDSA/ }, 'HMAC keyed with the public key')

  t.match(verifyReceipt(signReceipt(signingKeyFrom(seed.toString('hex'), 'k2'), payload), jwks), { ok: false, reason: /no Ed25519 key with kid "k2"/ })
  t.match(verifyReceipt('a.b', jwks), { ok: false, reason: /not a compact JWS/ })
  t.match(verifyReceipt('a.b.c.d', jwks), { ok: false, reason: /not a compact JWS/ })
  t.match(verifyReceipt(`${head}.!!.${sig}`, jwks), { ok: false, reason: /not a compact JWS/ })
  t.match(verifyReceipt(`${b64('x').slice(0, 3)}.${body}.${sig}`, jwks), { ok: false, reason: /not JSON/ })
  t.match(verifyReceipt(`${head}.${body}.${sig}`, { keys: [{ ...key.publicJwk, x: 'AAAA' }] }), { ok: false })
})
