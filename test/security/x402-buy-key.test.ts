/**
 * Buying an API key over x402 (`key-buy` behind `x402-paywall` with `intentHeader`): a purchase
 * has no key yet to bind the payment to, so the paywall binds it to the hash of the buyer's intent
 * header, a secret the payment does not carry.
 *
 * - Attack: the buyer's settlement is slow (402 `settlement_pending`); a mempool watcher rebuilds
 *   the payment header from the pending transaction's calldata and sends it with its own intent.
 *   Without the binding the copy completed the purchase once mined, and the watcher got the
 *   buyer's API key. Now it is 409 `payment_claimed_by_other_buyer`, and the buyer's retry gets it.
 * - Two callers racing with one payment: one buys, the other is refused (409).
 * - The same payment twice at once from the same buyer: one project, one grant, one key.
 * - A payment without the intent header: 400 `invalid_intent_header`, nothing verified.
 *
 * Checked on the embedded engine and on the shared engine with two gateway processes.
 */
import t, { type Test } from 'tap'
import { randomBytes } from 'node:crypto'
import { x402Client, x402HTTPClient } from '@x402/core/client'
import { ExactEvmScheme } from '@x402/evm/exact/client'
import { decodeFunctionData, serializeSignature, type Hex, type LocalAccount } from 'viem'
import { privateKeyToAccount } from 'viem/accounts'
import { hashCredential } from '../../core/projects/projects.ts'
import { eip3009Abi } from '../../plugins/x402-facilitator/evm/abi.ts'
import { startGatewayProcess, type GatewayProcess } from '../helpers/gateway-process.ts'
import { freshPrefix, freshSchema, needServers, PG_URL, REDIS_URL } from '../helpers/shared-servers.ts'
import { startTestUpstream, type TestUpstream } from '../helpers/upstream.ts'
import { tempDir } from '../helpers/temp.ts'
import { call, decodeHeader, type Answer } from '../helpers/x402.ts'
import { buyKeyConfig } from '../helpers/buy-key.ts'
import { price, startFixture } from '../plugins/x402-facilitator/evm-helpers.ts'

t.setTimeout(900_000)

const ADMIN_TOKEN = `admin_${randomBytes(12).toString('hex')}`
const CREDITS = 100
const f = await startFixture(84532)
const { accounts } = f.chain
const up: TestUpstream = await startTestUpstream()
t.teardown(async () => {
  await up.close()
  await f.close()
})
const PROJECT = `wallet-${accounts.payer.address.toLowerCase()}`

const config = (store: string) => buyKeyConfig({
  upstream: up.url, store, network: 'eip155:84532', asset: `{ address: "${f.chain.token}", name: USDC, version: "2", decimals: 6 }`,
  payTo: accounts.payee.address, rpcUrl: f.chain.rpcUrl, keyEnv: 'X402_FACILITATOR_KEY', chains: ['eip155:84532'], adminHash: hashCredential(ADMIN_TOKEN),
})
const START = { env: { X402_FACILITATOR_KEY: accounts.facilitator.privateKey }, startTimeoutMs: 120_000 }
const payerClient = new x402HTTPClient(x402Client.fromConfig({
  schemes: [{ network: 'eip155:84532', client: new ExactEvmScheme(privateKeyToAccount(accounts.payer.privateKey) as LocalAccount) }], spendControls: false,
}))
const intent = () => randomBytes(24).toString('base64url')
const buy = (gw: GatewayProcess, headers: Record<string, string>) => call(`${gw.url}/keys/buy`, { method: 'POST', headers })
const admin = async (gw: GatewayProcess, path: string) => (await call(gw.adminUrl + path, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } })).json()
const granted = async (gw: GatewayProcess): Promise<number> => (await admin(gw, `/admin/projects/${PROJECT}/credits`)).balance?.granted ?? 0
const keyCount = async (gw: GatewayProcess): Promise<number> => (await admin(gw, `/admin/projects/${PROJECT}/keys`)).keys?.length ?? 0
const settleOf = (answer: Answer) => decodeHeader(answer.headers['payment-response'])

/** The payer's payment header for the key purchase (the SDK's HTTP client). */
async function payerHeader(gw: GatewayProcess): Promise<Record<string, string>> {
  const first = await buy(gw, {})
  if (first.status !== 402) throw new Error(`expected 402, got ${first.status}`)
  const required = payerClient.getPaymentRequiredResponse((name) => first.headers[name.toLowerCase()] as string | undefined ?? null, first.json())
  return payerClient.encodePaymentSignatureHeader(await payerClient.createPaymentPayload(required))
}

/** What a mempool watcher can build: the authorization and signature out of the pending transaction's calldata. */
async function headerFromCalldata(transaction: Hex, gw: GatewayProcess): Promise<Record<string, string>> {
  const tx = await f.ctx.publicClient.getTransaction({ hash: transaction })
  const { args } = decodeFunctionData({ abi: eip3009Abi, data: tx.input })
  const [from, to, value, validAfter, validBefore, nonce, v, r, s] = args as unknown as [Hex, Hex, bigint, bigint, bigint, Hex, number, Hex, Hex]
  const offered = decodeHeader((await buy(gw, {})).headers['payment-required'])
  const payload = {
    x402Version: 2, resource: offered.resource, accepted: offered.accepts[0],
    payload: { authorization: { from, to, value: value.toString(), validAfter: validAfter.toString(), validBefore: validBefore.toString(), nonce }, signature: serializeSignature({ r, s, v: BigInt(v) }) },
  }
  return { 'PAYMENT-SIGNATURE': Buffer.from(JSON.stringify(payload)).toString('base64') }
}

/** First purchase: the same payment from the same buyer twice at once (on two instances when given). */
async function twiceAtOnce(t: Test, a: GatewayProcess, b: GatewayProcess) {
  const headers = { ...(await payerHeader(a)), 'x-buy-intent': intent() }
  const answers = await Promise.all([buy(a, headers), buy(b, headers)])
  const won = answers.filter((x) => x.status === 200)
  t.equal(won.length, 1, `one purchase completes (${answers.map((x) => `${x.status} ${x.json().code ?? x.json().error ?? ''}`).join(', ')})`)
  t.match(won[0]!.json(), { project: PROJECT, key: /^tg_/, granted: CREDITS })
  const lost = answers.find((x) => x.status !== 200)!
  t.ok([402, 409].includes(lost.status), 'the other is refused')
  t.notOk(lost.text.includes('tg_'), 'and carries no key')
  t.equal(await granted(a), CREDITS, 'one grant')
  t.equal(await keyCount(b), 1, 'one key')
  t.equal((await admin(a, '/admin/projects')).projects.filter((p: any) => p.id.startsWith('wallet-')).length, 1, 'one project')
}

/** One payment sent at once by two callers (two intents): one buys, the other is refused. */
async function race(t: Test, a: GatewayProcess, b: GatewayProcess) {
  const before = await granted(a)
  const payment = await payerHeader(a)
  const answers = await Promise.all([buy(a, { ...payment, 'x-buy-intent': intent() }), buy(b, { ...payment, 'x-buy-intent': intent() })])
  const won = answers.findIndex((x) => x.status === 200)
  t.ok(won >= 0, `one purchase completes (${answers.map((x) => x.status).join(', ')})`)
  const lost = answers[1 - won]!
  t.same([lost.status, lost.json().code], [409, 'payment_claimed_by_other_buyer'], 'the other caller gets a clear refusal')
  t.equal(await granted(b), before + CREDITS, 'granted once')
}

/** The buyer's purchase goes pending; a watcher replays it from calldata with its own intent, before and after mining. */
async function pendingClaim(t: Test, victimGw: GatewayProcess, attackerGw: GatewayProcess) {
  const victim = { ...(await payerHeader(victimGw)), 'x-buy-intent': intent() }
  const before = await granted(victimGw)
  const keysBefore = await keyCount(victimGw)
  await f.chain.request('evm_setAutomine', [false])
  t.teardown(() => f.chain.request('evm_setAutomine', [true]))
  const pending = await buy(victimGw, victim)
  t.equal(pending.status, 402)
  t.match(settleOf(pending), { errorReason: 'settlement_pending', transaction: /^0x[0-9a-f]{64}$/ }, 'the buyer’s settlement is pending')
  const stolen = { ...(await headerFromCalldata(settleOf(pending).transaction, attackerGw)), 'x-buy-intent': intent() }
  const early = await buy(attackerGw, stolen)
  t.same([early.status, early.json().code], [409, 'payment_claimed_by_other_buyer'], 'before it is mined, the copy is refused')
  await f.chain.request('evm_setAutomine', [true])
  await f.chain.request('evm_mine', [])
  const late = await buy(attackerGw, stolen)
  t.same([late.status, late.json().code], [409, 'payment_claimed_by_other_buyer'], 'once mined, still refused')
  t.notOk(late.text.includes('tg_'), 'no key for the watcher')
  const retry = await buy(victimGw, victim)
  t.equal(retry.status, 200, 'the buyer’s retry with the same header and intent completes the purchase')
  t.match(retry.json(), { project: PROJECT, granted: CREDITS })
  t.equal(await granted(attackerGw), before + CREDITS, 'granted once')
  t.equal(await keyCount(attackerGw), keysBefore, 'no key was made for anyone else')
}

t.test('embedded engine (sqlite)', async (t) => {
  const gw = await startGatewayProcess(config(`store: { dataDir: '{{DIR}}/data' }`), { dir: tempDir('tollgate-buy-key-sec-'), ...START })
  t.teardown(() => gw.stop('SIGKILL'))
  await t.test('a payment without the intent header is refused before verify', async (t) => {
    const answer = await buy(gw, await payerHeader(gw))
    t.same([answer.status, answer.json().code], [400, 'invalid_intent_header'])
    t.match(answer.json().error, /x-buy-intent/)
    t.equal((await buy(gw, { ...(await payerHeader(gw)), 'x-buy-intent': 'short' })).json().code, 'invalid_intent_header')
  })
  await t.test('the same payment twice at once: one project, one grant, one key', (t) => twiceAtOnce(t, gw, gw))
  await t.test('two callers racing with one payment: one buys, the other is refused', (t) => race(t, gw, gw))
  await t.test('a pending purchase cannot be completed by another caller', (t) => pendingClaim(t, gw, gw))
})

t.test('shared engine (PostgreSQL + Redis), two gateway processes', async (t) => {
  if (!(await needServers(t))) return
  const store = `store: { engine: shared, postgres: '${PG_URL}', redis: '${REDIS_URL}', schema: ${freshSchema(t)}, keyPrefix: '${freshPrefix(t)}', instanceTimeoutMs: 5000 }`
  const a = await startGatewayProcess(config(store), START)
  t.teardown(() => a.stop('SIGKILL'))
  const b = await startGatewayProcess(config(store), START)
  t.teardown(() => b.stop('SIGKILL'))
  await t.test('the same payment at once on two instances: one project, one grant, one key', (t) => twiceAtOnce(t, a, b))
  await t.test('two callers racing across two instances: one buys, the other is refused', (t) => race(t, a, b))
  await t.test('a pending purchase cannot be completed by a caller on another instance', (t) => pendingClaim(t, a, b))
})
