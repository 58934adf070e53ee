/**
 * Issue 25, finding 2, Solana variant: a stored (or in-flight) settle answer is given only to the
 * same signed transaction. The settlement record is keyed by the message hash, so before the fix
 * any copy of the message — whatever the payer's signature bytes — was answered from the record
 * (`success: true` with the original signature) without being verified in full. Now a copy with
 * other signature bytes is verified in full (simulation included) and refused; an all-zero
 * signature gets the signature check's refusal. Through a real gateway process
 * (examples/config/x402.yaml, its Solana facilitator route) on the local SVM (litesvm).
 *
 * The copy with other bytes is a second valid Ed25519 signature of the payer (a random nonce
 * instead of RFC 8032's derived one): the only "other signature" the payer's own signature check
 * lets through, so the only way to reach the record with a different payload.
 */
import t from 'tap'
import { createHash, randomBytes } from 'node:crypto'
import { ed25519 } from '@noble/curves/ed25519'
import { bytesToNumberLE, numberToBytesLE } from '@noble/curves/abstract/utils'
import { startGatewayProcess, type GatewayProcess } from '../helpers/gateway-process.ts'
import { call, x402Config } from '../helpers/x402.ts'
import { decodeTransaction, withSignature } from '../../plugins/x402-facilitator/svm/wire.ts'
import { officialBody, startSvmFixture } from '../plugins/x402-facilitator/svm-helpers.ts'

t.setTimeout(600_000)

const KEY = `xk_svmforge_${randomBytes(10).toString('hex')}`
const f = await startSvmFixture()
let gw: GatewayProcess

t.before(async () => {
  gw = await startGatewayProcess(x402Config([{ id: 'payments', key: KEY, scopes: ['x402'], allocation: 100000 }]), {
    startTimeoutMs: 90_000,
    env: {
      TOLLGATE_PORT: '0', TOLLGATE_ADMIN_PORT: '0', MIRROR_TESTNET_URL: 'http://127.0.0.1:9',
      // No EVM chain here: base/testnet is unreachable (503), which leaves Solana unaffected.
      EVM_RPC_URL: 'http://127.0.0.1:9', X402_FACILITATOR_KEY: '11'.repeat(32), X402_ASSET: `0x${'22'.repeat(20)}`, X402_PAY_TO: `0x${'33'.repeat(20)}`,
      SOLANA_RPC_URL: f.local.rpcUrl, X402_SOLANA_FACILITATOR_KEY: f.local.accounts.facilitator.secretKeyBase58, X402_SOLANA_ASSET: f.local.mint,
    },
  })
})
t.teardown(async () => {
  await gw?.stop('SIGKILL')
  await f.close()
})

const settle = (body: unknown) => call(`${gw.url}/x402/solana/testnet/${KEY}/settle`, { body })
const payeeBalance = () => f.local.tokenBalance(f.local.accounts.payee.address)

/** A second valid Ed25519 signature of `message` by `secretKey` (seed ‖ public key): random nonce r. */
function resign(secretKey: Uint8Array, message: Uint8Array): Uint8Array {
  const { scalar, pointBytes } = ed25519.utils.getExtendedPublicKey(secretKey.subarray(0, 32))
  const order = ed25519.CURVE.n
  const r = bytesToNumberLE(randomBytes(64)) % order
  const R = ed25519.ExtendedPoint.BASE.multiply(r).toRawBytes()
  const k = bytesToNumberLE(createHash('sha512').update(R).update(pointBytes).update(message).digest()) % order
  return new Uint8Array([...R, ...numberToBytesLE((r + k * scalar) % order, 32)])
}

/** `body` with the payer's signature (slot 1) replaced: `resigned` (valid, other bytes) or all zeros. */
function withPayerSignature(body: any, kind: 'resigned' | 'zero'): any {
  const wire = new Uint8Array(Buffer.from(body.paymentPayload.payload.transaction, 'base64'))
  const tx = decodeTransaction(wire)
  const signature = kind === 'zero' ? new Uint8Array(64) : resign(f.local.accounts.payer.secretKey, tx.message)
  if (tx.staticKeys[1] !== f.local.accounts.payer.address) throw new Error(`signer 1 is ${tx.staticKeys[1]}, not the payer`)
  if (kind === 'resigned' && (!ed25519.verify(signature, tx.message, f.local.accounts.payer.secretKey.subarray(32)) || Buffer.from(signature).equals(Buffer.from(tx.signatures[1]!)))) {
    throw new Error('the re-signed copy must verify and differ from the original')
  }
  const copy = structuredClone(body)
  copy.paymentPayload.payload.transaction = Buffer.from(withSignature(wire, tx, 1, signature)).toString('base64')
  return copy
}

t.test('after a genuine settle, copies with other signature bytes are not answered from the record', async (t) => {
  for (const version of [2, 1] as const) {
    const genuine = await officialBody(f, version)
    const settled = await settle(genuine)
    t.match(settled.json(), { success: true, transaction: /^[1-9A-HJ-NP-Za-km-z]{64,88}$/ }, `v${version}: the genuine payment settles`)
    const before = await payeeBalance()
    const zero = (await settle(withPayerSignature(genuine, 'zero'))).json()
    t.match(zero, { success: false, errorReason: 'invalid_exact_svm_payload_signature_invalid', transaction: '' }, `v${version}: an all-zero signature is refused`)
    const resigned = (await settle(withPayerSignature(genuine, 'resigned'))).json()
    // Verified in full: its simulation finds the transaction already processed.
    t.match(resigned, { success: false, errorReason: 'invalid_exact_svm_transaction_simulation_failed', transaction: '' }, `v${version}: a re-signed copy is verified in full, not given the stored success`)
    t.same((await settle(genuine)).json(), settled.json(), `v${version}: the same signed transaction still gets its stored answer`)
    t.equal(await payeeBalance(), before, 'nothing more moved')
  }
})

t.test('while the genuine settle is in flight, a re-signed copy does not share its answer', async (t) => {
  const genuine = await officialBody(f, 2)
  f.local.front.hold()
  const first = settle(genuine)
  // Let the genuine settle claim its record and send (held by the cluster) before the copy arrives.
  await new Promise((resolve) => setTimeout(resolve, 1000))
  const copy = settle(withPayerSignature(genuine, 'resigned'))
  await new Promise((resolve) => setTimeout(resolve, 1000))
  f.local.front.release()
  t.match((await first).json(), { success: true })
  // It passes every check (the genuine one has not landed yet), so it is told another copy is being settled.
  t.match((await copy).json(), { success: false, errorReason: 'duplicate_settlement', transaction: '' }, 'the copy is refused')
})
