/**
 * Issue 25, finding 1: a pending credit purchase could be claimed by another project. The victim
 * buys credits on its key, the settlement is slow (402 `settlement_pending`); the authorization is
 * public in the pending transaction's calldata; the attacker sends it on the attacker's own key and,
 * once mined, was granted the credits while the victim's retry got `nonce_already_used`.
 *
 * The rule: a payment settles, retries and redeems only for the project whose request first
 * presented it; another project gets 409 `payment_claimed_by_other_project`; two projects racing
 * with one payment → one grant, to the first claimant. Checked on the embedded engine (one gateway)
 * and the shared engine (two gateway processes on one PostgreSQL + Redis: victim on one, attacker on
 * the other), for the credit purchase (`credit-top-up`) and for a plain paid route behind a key.
 * The attacker's header is rebuilt from the pending transaction's calldata, as a watcher of the
 * mempool would.
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
import { price, startFixture } from '../plugins/x402-facilitator/evm-helpers.ts'

t.setTimeout(900_000)

const ADMIN_TOKEN = `admin_${randomBytes(12).toString('hex')}`
const KEY = { victim: `xk_victim_${randomBytes(10).toString('hex')}`, attacker: `xk_attacker_${randomBytes(10).toString('hex')}` }
const CREDITS_PER_PAYMENT = 100
const f = await startFixture(84532)
const { accounts } = f.chain
const up: TestUpstream = await startTestUpstream()
t.teardown(async () => {
  await up.close()
  await f.close()
})

function config(store: string): string {
  const paywall = `
      - name: x402-paywall
        config:
          price: "${price}"
          payTo: "${accounts.payee.address}"
          networks:
            - network: eip155:84532
              asset: { address: "${f.chain.token}", name: USDC, version: "2", decimals: 6 }
              facilitator: { rpcUrl: "${f.chain.rpcUrl}", signerKeyEnv: X402_FACILITATOR_KEY, receiptTimeoutMs: 1000 }`
  return `
version: 1
server: { listen: { host: 127.0.0.1, port: 0 } }
admin: { listen: { host: 127.0.0.1, port: 0 }, tokenHash: ${hashCredential(ADMIN_TOKEN)} }
${store}
watch: false
projects:
  - { id: victim, scopes: [x402], credits: { allocation: 1, period: month }, keys: [{ label: main, hash: ${hashCredential(KEY.victim)} }] }
  - { id: attacker, scopes: [x402], credits: { allocation: 1, period: month }, keys: [{ label: main, hash: ${hashCredential(KEY.attacker)} }] }
upstreams:
  echo: { url: '${up.url}' }
routes:
  - name: buy-credits
    methods: [POST]
    path: /credits/:apiKey/buy
    errorFormat: x402
    handler: { name: credit-top-up, config: { unitsPerCredit: "100" } }
    plugins:
      - { name: key-in-path-auth, config: { param: apiKey, scope: x402 } }${paywall}
  - name: paid-content
    methods: [GET]
    path: /content/:apiKey/*rest
    upstream: echo
    errorFormat: x402
    plugins:
      - { name: key-in-path-auth, config: { param: apiKey, scope: x402 } }${paywall}
`
}

const START = { env: { X402_FACILITATOR_KEY: accounts.facilitator.privateKey }, startTimeoutMs: 90_000 }
const payerClient = new x402HTTPClient(x402Client.fromConfig({
  schemes: [{ network: 'eip155:84532', client: new ExactEvmScheme(privateKeyToAccount(accounts.payer.privateKey) as LocalAccount) }], spendControls: false,
}))
const buyUrl = (gw: GatewayProcess, who: keyof typeof KEY) => `${gw.url}/credits/${KEY[who]}/buy`
const contentUrl = (gw: GatewayProcess, who: keyof typeof KEY) => `${gw.url}/content/${KEY[who]}/thing`
const send = (url: string, headers: Record<string, string> = {}) =>
  call(url, { method: url.includes('/credits/') ? 'POST' : 'GET', headers })
const granted = async (gw: GatewayProcess, project: string): Promise<number> =>
  (await call(`${gw.adminUrl}/admin/projects/${project}/credits`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } })).json().balance.granted

/** The payer's payment header for what `url` offers (the SDK's HTTP client). */
async function payerHeader(url: string): Promise<Record<string, string>> {
  const first = await send(url)
  if (first.status !== 402) throw new Error(`expected 402, got ${first.status}`)
  const required = payerClient.getPaymentRequiredResponse((name) => first.headers[name.toLowerCase()] as string | undefined ?? null, first.json())
  return payerClient.encodePaymentSignatureHeader(await payerClient.createPaymentPayload(required))
}

/** What a mempool watcher can build: the authorization and signature out of the pending transaction's calldata. */
async function headerFromCalldata(transaction: Hex, url: string): Promise<Record<string, string>> {
  const tx = await f.ctx.publicClient.getTransaction({ hash: transaction })
  const { args } = decodeFunctionData({ abi: eip3009Abi, data: tx.input })
  const [from, to, value, validAfter, validBefore, nonce, v, r, s] = args as unknown as [Hex, Hex, bigint, bigint, bigint, Hex, number, Hex, Hex]
  const offered = decodeHeader((await send(url)).headers['payment-required'])
  const payload = {
    x402Version: 2, resource: offered.resource, accepted: offered.accepts[0],
    payload: {
      authorization: { from, to, value: value.toString(), validAfter: validAfter.toString(), validBefore: validBefore.toString(), nonce },
      signature: serializeSignature({ r, s, v: BigInt(v) }),
    },
  }
  return { 'PAYMENT-SIGNATURE': Buffer.from(JSON.stringify(payload)).toString('base64') }
}

const settleOf = (answer: Answer) => decodeHeader(answer.headers['payment-response'])
const mine = async () => {
  await f.chain.request('evm_setAutomine', [true])
  await f.chain.request('evm_mine', [])
}

/** The victim's purchase (or paid request) goes pending; the attacker replays it from calldata before and after mining. */
async function pendingClaim(t: Test, victimGw: GatewayProcess, attackerGw: GatewayProcess, target: 'buy' | 'content') {
  const url = target === 'buy' ? buyUrl : contentUrl
  const header = await payerHeader(url(victimGw, 'victim'))
  const payeeBefore = await f.balanceOf(accounts.payee.address)
  const creditsBefore = { victim: await granted(victimGw, 'victim'), attacker: await granted(victimGw, 'attacker') }
  await f.chain.request('evm_setAutomine', [false])
  t.teardown(() => f.chain.request('evm_setAutomine', [true]))
  const pending = await send(url(victimGw, 'victim'), header)
  t.equal(pending.status, 402)
  t.match(settleOf(pending), { success: false, errorReason: 'settlement_pending', transaction: /^0x[0-9a-f]{64}$/ }, 'the victim’s settlement is pending')
  const stolen = await headerFromCalldata(settleOf(pending).transaction, url(attackerGw, 'attacker'))

  const early = await send(url(attackerGw, 'attacker'), stolen)
  t.equal(early.status, 409, 'before it is mined, the copy on another project’s key is refused')
  t.equal(early.json().code, 'payment_claimed_by_other_project')
  t.match(early.json().error, /another project/)
  await mine()
  t.equal(await f.balanceOf(accounts.payee.address), payeeBefore + BigInt(price), 'the victim’s transfer landed')
  const late = await send(url(attackerGw, 'attacker'), stolen)
  t.same([late.status, late.json().code], [409, 'payment_claimed_by_other_project'], 'once mined, still refused')

  const retry = await send(url(victimGw, 'victim'), header)
  t.equal(retry.status, 200, 'the victim’s retry with the same header completes the purchase')
  t.match(settleOf(retry), { success: true, transaction: settleOf(pending).transaction })
  if (target === 'buy') t.equal(retry.json().granted, CREDITS_PER_PAYMENT)
  const after = await send(url(attackerGw, 'attacker'), stolen)
  t.same([after.status, after.json().code], [409, 'payment_claimed_by_other_project'], 'after the victim’s delivery, still refused')
  t.same({ victim: await granted(attackerGw, 'victim'), attacker: await granted(attackerGw, 'attacker') }, {
    victim: creditsBefore.victim + (target === 'buy' ? CREDITS_PER_PAYMENT : 0), attacker: creditsBefore.attacker,
  }, 'the credits went to the victim, none to the attacker')
  t.equal(await f.balanceOf(accounts.payee.address), payeeBefore + BigInt(price), 'paid once')
}

/** One payment sent at once on both projects' keys: one grant, to the first claimant; the other is refused. */
async function race(t: Test, gwA: GatewayProcess, gwB: GatewayProcess) {
  const before = { victim: await granted(gwA, 'victim'), attacker: await granted(gwA, 'attacker') }
  const header = await payerHeader(buyUrl(gwA, 'victim'))
  const answers = await Promise.all([send(buyUrl(gwA, 'victim'), header), send(buyUrl(gwB, 'attacker'), header)])
  const won = answers.findIndex((a) => a.status === 200)
  t.ok(won >= 0, `one purchase completes (${answers.map((a) => a.status).join(', ')})`)
  const lost = answers[1 - won]!
  t.same([lost.status, lost.json().code], [409, 'payment_claimed_by_other_project'], 'the other gets a clear refusal')
  t.equal(answers[won]!.json().granted, CREDITS_PER_PAYMENT)
  const winner = won === 0 ? 'victim' : 'attacker'
  const loser = won === 0 ? 'attacker' : 'victim'
  t.equal(answers[won]!.json().project, winner)
  t.equal(await granted(gwA, winner), before[winner] + CREDITS_PER_PAYMENT, 'granted once, to the first claimant')
  t.equal(await granted(gwA, loser), before[loser], 'nothing to the other')
}

t.test('embedded engine (sqlite)', async (t) => {
  const gw = await startGatewayProcess(config(`store: { dataDir: '{{DIR}}/data' }`), { dir: tempDir('tollgate-x402-claim-'), ...START })
  t.teardown(() => gw.stop('SIGKILL'))
  await t.test('a pending credit purchase cannot be claimed by another project', (t) => pendingClaim(t, gw, gw, 'buy'))
  await t.test('a pending paid request cannot be redeemed by another project', (t) => pendingClaim(t, gw, gw, 'content'))
  await t.test('two projects racing with one payment: one grant, the other refused', (t) => race(t, gw, gw))
})

t.test('shared engine (PostgreSQL + Redis), two gateway processes', async (t) => {
  if (!(await needServers(t))) return
  const store = `store: { engine: shared, postgres: '${PG_URL}', redis: '${REDIS_URL}', schema: ${freshSchema(t)}, keyPrefix: '${freshPrefix(t)}', instanceTimeoutMs: 5000 }`
  // One after the other: two starts at once can exceed the start timeout on a busy machine.
  const a = await startGatewayProcess(config(store), START)
  t.teardown(() => a.stop('SIGKILL'))
  const b = await startGatewayProcess(config(store), START)
  t.teardown(() => b.stop('SIGKILL'))
  await t.test('a pending credit purchase cannot be claimed by another project on another instance', (t) => pendingClaim(t, a, b, 'buy'))
  await t.test('a pending paid request cannot be redeemed by another project on another instance', (t) => pendingClaim(t, a, b, 'content'))
  await t.test('two projects racing across two instances: one grant, the other refused', (t) => race(t, a, b))
})
