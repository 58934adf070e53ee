/**
 * One balance for both rails: a project buys credits with an x402 payment (the `credit-top-up`
 * handler behind `x402-paywall`, EVM exact on the local hardhat chain, paid with the official
 * `@x402/fetch` wrapper), and its API-key traffic then runs on them. The grant is keyed by the
 * settlement: a replayed payment header, or the same header twice at once, grants once; a
 * `kill -9` right after the answer keeps the grant; the ledger names the payment.
 */
import t from 'tap'
import { randomBytes } from 'node:crypto'
import { x402Client, x402HTTPClient } from '@x402/core/client'
import { decodePaymentResponseHeader, wrapFetchWithPayment } from '@x402/fetch'
import { ExactEvmScheme } from '@x402/evm/exact/client'
import { privateKeyToAccount } from 'viem/accounts'
import type { LocalAccount } from 'viem'
import { hashCredential } from '../../core/projects/projects.ts'
import { startGatewayProcess, type GatewayProcess } from '../helpers/gateway-process.ts'
import { startTestUpstream, type TestUpstream } from '../helpers/upstream.ts'
import { tempDir } from '../helpers/temp.ts'
import { call } from '../helpers/x402.ts'
import { price, startFixture } from '../plugins/x402-facilitator/evm-helpers.ts'

// Gateway processes start slowly on a busy 2-core machine: more than the runner's default per file.
t.setTimeout(600_000)

const KEY = `xk_cr_${randomBytes(10).toString('hex')}`
const ADMIN_TOKEN = `admin_${randomBytes(12).toString('hex')}`
/** 10000 units (the price) at 100 units per credit. */
const CREDITS_PER_PAYMENT = 100
const f = await startFixture(84532)
const { accounts } = f.chain

function config(up: TestUpstream): string {
  return `
version: 1
server: { listen: { host: 127.0.0.1, port: 0 } }
admin: { listen: { host: 127.0.0.1, port: 0 }, tokenHash: ${hashCredential(ADMIN_TOKEN)} }
store: { dataDir: '{{DIR}}/data' }
watch: false
projects:
  - id: buyer
    scopes: [x402]
    credits: { allocation: 1, period: month }
    keys: [{ label: main, hash: ${hashCredential(KEY)} }]
upstreams:
  echo: { url: '${up.url}' }
routes:
  - name: buy-credits
    methods: [POST]
    path: /credits/:apiKey/buy
    errorFormat: x402
    handler: { name: credit-top-up, config: { unitsPerCredit: "100" } }
    plugins:
      - { name: key-in-path-auth, config: { param: apiKey, scope: x402 } }
      - name: x402-paywall
        config:
          price: "${price}"
          payTo: "${accounts.payee.address}"
          description: 100 credits
          networks:
            - network: eip155:84532
              asset: { address: "${f.chain.token}", name: USDC, version: "2", decimals: 6 }
              facilitator: { rpcUrl: "${f.chain.rpcUrl}", signerKeyEnv: X402_FACILITATOR_KEY }
  - name: metered
    path: /api/:apiKey/call
    upstream: echo
    plugins:
      - { name: key-in-path-auth, config: { param: apiKey, scope: x402 } }
      - { name: credit-meter, config: { apiType: x402, cost: 1 } }
`
}

const env = { X402_FACILITATOR_KEY: accounts.facilitator.privateKey }
const START = { env, startTimeoutMs: 90_000 }
const adminGet = async (gw: GatewayProcess, path: string) =>
  (await call(gw.adminUrl + path, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } })).json()
const metered = async (gw: GatewayProcess) => (await call(`${gw.url}/api/${KEY}/call`)).status

/** The payment headers for one purchase, made with the SDK's HTTP client (to send them more than once). */
async function paymentHeaders(gw: GatewayProcess): Promise<Record<string, string>> {
  const client = new x402HTTPClient(x402Client.fromConfig({ schemes: [{ network: 'eip155:84532', client: new ExactEvmScheme(privateKeyToAccount(accounts.payer.privateKey) as LocalAccount) }], spendControls: false }))
  const first = await fetch(`${gw.url}/credits/${KEY}/buy`, { method: 'POST' })
  if (first.status !== 402) throw new Error(`expected 402, got ${first.status}`)
  const required = client.getPaymentRequiredResponse((name) => first.headers.get(name), await first.json())
  return client.encodePaymentSignatureHeader(await client.createPaymentPayload(required))
}
const buyWith = (gw: GatewayProcess, headers: Record<string, string>) => call(`${gw.url}/credits/${KEY}/buy`, { method: 'POST', headers })

t.test('x402 payments become project credits, once per settlement', async (t) => {
  t.setTimeout(300_000)
  const up = await startTestUpstream()
  const dir = tempDir('tollgate-x402-credits-')
  let gw = await startGatewayProcess(config(up), { dir, ...START })
  t.teardown(async () => {
    await gw.stop('SIGKILL')
    await up.close()
    await f.close()
  })

  await t.test('the official fetch wrapper buys credits; API-key traffic runs on them', async (t) => {
    t.same([await metered(gw), await metered(gw)], [200, 402], 'the allocation of 1 is spent')
    const unpaid = await call(`${gw.url}/credits/${KEY}/buy`, { method: 'POST' })
    t.equal(unpaid.status, 402, 'no payment: 402 with the offer')
    t.equal((await call(`${gw.url}/credits/wrong-key/buy`, { method: 'POST' })).status, 401, 'the buyer is the project of the key')

    const account = privateKeyToAccount(accounts.payer.privateKey) as LocalAccount
    const buyer = new x402Client()
      .register('eip155:84532', new ExactEvmScheme(account))
      .setSpendControls({ allowedAssets: [{ network: 'eip155:84532', asset: f.chain.token, maxAmountPerPayment: price }] })
    const payeeBefore = await f.balanceOf(accounts.payee.address)
    const res = await wrapFetchWithPayment(fetch, buyer)(`${gw.url}/credits/${KEY}/buy`, { method: 'POST' })
    t.equal(res.status, 200)
    const settle = decodePaymentResponseHeader(res.headers.get('payment-response')!)
    t.match(settle, { success: true, network: 'eip155:84532', payer: accounts.payer.address, transaction: /^0x[0-9a-f]{64}$/ })
    const body = (await res.json()) as any
    t.same(body, {
      project: 'buyer',
      granted: CREDITS_PER_PAYMENT,
      grant: { id: `x402:eip155:84532:${settle.transaction}`, amount: CREDITS_PER_PAYMENT, reason: 'x402', payer: accounts.payer.address, network: 'eip155:84532', transaction: settle.transaction },
      period: body.period,
      balance: { allocation: 1, granted: 100, used: 1, remaining: 100 },
    }, 'the answer shows the grant and the new balance')
    t.equal(await f.balanceOf(accounts.payee.address), payeeBefore + BigInt(price), 'the payee got the price')

    const burst = await Promise.all(Array.from({ length: CREDITS_PER_PAYMENT }, () => metered(gw)))
    t.equal(burst.filter((s) => s === 200).length, CREDITS_PER_PAYMENT, 'exactly the credits bought are served')
    t.equal(await metered(gw), 402)
  })

  await t.test('a replayed payment header grants nothing; the same header twice at once grants once', async (t) => {
    const headers = await paymentHeaders(gw)
    const first = await buyWith(gw, headers)
    t.equal(first.status, 200)
    t.equal(first.json().granted, CREDITS_PER_PAYMENT)
    const replay = await buyWith(gw, headers)
    t.equal(replay.status, 402, 'the replay is refused (its nonce is used)')
    t.equal((await adminGet(gw, '/admin/projects/buyer/credits')).balance.granted, 200, 'one grant for one payment')

    const twice = await paymentHeaders(gw)
    const both = await Promise.all([buyWith(gw, twice), buyWith(gw, twice)])
    t.same(both.map((a) => a.status).sort(), [200, 402], 'one delivery')
    t.equal((await adminGet(gw, '/admin/projects/buyer/credits')).balance.granted, 300, 'one grant')
  })

  await t.test('a kill -9 right after the answer keeps the grant; the ledger names the payment', async (t) => {
    const bought = await buyWith(gw, await paymentHeaders(gw))
    t.equal(bought.status, 200)
    const { grant } = bought.json()
    gw.child.kill('SIGKILL')
    await gw.exited
    gw = await startGatewayProcess(config(up), { dir, ...START })
    const ledger = await adminGet(gw, '/admin/projects/buyer/credits/ledger')
    t.same(ledger.balance, { allocation: 1, granted: 400, used: 101, remaining: 300 })
    const grants = ledger.entries.filter((e: any) => e.kind === 'grant')
    t.equal(grants.length, 4)
    t.match(grants.at(-1), { id: grant.id, reason: 'x402', actor: accounts.payer.address, amount: CREDITS_PER_PAYMENT })
    t.equal(ledger.entries.reduce((sum: number, e: any) => sum + e.amount, 0), 300, 'the entries add up to the balance')
    t.equal(await metered(gw), 200, 'the restarted gateway serves on the bought credits')
  })
})
