/**
 * Paying by use through a real gateway process: a prove route whose credit meter charges 2 credits
 * per proof, behind an x402 paywall with `scheme: upto`. The official fetch wrapper (`@x402/fetch`
 * with the official `UptoEvmScheme`) signs a Permit2 maximum; the gateway settles exactly what the
 * request used (credits × pricePerCredit), capped at the maximum, checked on chain.
 */
import t from 'tap'
import { randomBytes } from 'node:crypto'
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { x402Client } from '@x402/core/client'
import { decodePaymentResponseHeader, wrapFetchWithPayment } from '@x402/fetch'
import { UptoEvmScheme } from '@x402/evm/upto/client'
import type { LocalAccount } from 'viem'
import { privateKeyToAccount } from 'viem/accounts'
import { startGatewayProcess, type GatewayProcess } from '../helpers/gateway-process.ts'
import { projectsYaml } from '../helpers/privnet.ts'
import { decodeHeader } from '../helpers/x402.ts'
import { startFixture } from '../plugins/x402-facilitator/evm-helpers.ts'

const KEY = `zk_upto_${randomBytes(10).toString('hex')}`
const MAXIMUM = 100_000n
const PER_CREDIT = 1_000n
const f = await startFixture(84532)
const { accounts } = f.chain
let prover: Server
let gw: GatewayProcess

function config(proverUrl: string): string {
  return `version: 1
server: { listen: { host: 127.0.0.1, port: 0 } }
admin: { listen: { host: 127.0.0.1, port: 0 } }
store: { dataDir: "{{DIR}}/data" }
${projectsYaml([{ id: 'metered', key: KEY, scopes: ['zkpaas'], allocation: 100000 }])}
upstreams:
  prover: { url: "${proverUrl}" }
routes:
  - name: paid-prove
    methods: [POST]
    path: /prove/:apiKey
    rewrite: /prove
    upstream: prover
    errorFormat: x402
    plugins:
      - { name: key-in-path-auth, config: { param: apiKey, scope: zkpaas } }
      - { name: credit-meter, config: { apiType: PRIVNET_ZKPAAS, cost: 2, perItem: { path: proofs } } }
      - name: x402-paywall
        config:
          scheme: upto
          price: "${MAXIMUM}"
          pricePerCredit: "${PER_CREDIT}"
          payTo: "${accounts.payee.address}"
          description: proofs, paid per proof
          networks:
            - network: eip155:84532
              asset: { address: "${f.chain.token}", name: USDC, version: "2", decimals: 6 }
              facilitator: { rpcUrl: "${f.chain.rpcUrl}", signerKeyEnv: X402_FACILITATOR_KEY, pollingIntervalMs: 50 }
`
}

t.before(async () => {
  prover = createServer((req, res) => {
    req.resume()
    req.on('end', () => res.writeHead(200, { 'content-type': 'application/json' }).end('{"proved":true}'))
  })
  await new Promise<void>((resolve) => prover.listen(0, '127.0.0.1', resolve))
  gw = await startGatewayProcess(config(`http://127.0.0.1:${(prover.address() as AddressInfo).port}`), {
    env: { X402_FACILITATOR_KEY: accounts.facilitator.privateKey },
  })
})
t.teardown(async () => {
  await gw?.stop('SIGKILL')
  await new Promise((resolve) => prover?.close(resolve))
  await f.close()
})

const url = () => `${gw.url}/prove/${KEY}`
const balances = () => Promise.all([f.balanceOf(accounts.payer.address), f.balanceOf(accounts.payee.address)])
const payingFetch = () => wrapFetchWithPayment(fetch, x402Client.fromConfig({
  schemes: [{ network: 'eip155:84532', client: new UptoEvmScheme(privateKeyToAccount(accounts.payer.privateKey) as LocalAccount) }],
  spendControls: false,
}))
const prove = (proofs: number) => payingFetch()(url(), {
  method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ proofs: Array.from({ length: proofs }, (_, i) => ({ id: i })) }),
})

t.test('the 402 offers upto over Permit2 with the maximum and the settling facilitator', async (t) => {
  const res = await fetch(url(), { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"proofs":[1]}' })
  t.equal(res.status, 402)
  const required = decodeHeader(res.headers.get('payment-required') ?? undefined)
  t.match(required.accepts, [{
    scheme: 'upto', network: 'eip155:84532', amount: String(MAXIMUM),
    extra: { assetTransferMethod: 'permit2', facilitatorAddress: accounts.facilitator.address },
  }])
  t.same(((await res.json()) as { accepts: unknown[] }).accepts, [], 'nothing for v1, which has no upto')
})

t.test('the official client pays exactly what the request used: 3 proofs × 2 credits × pricePerCredit', async (t) => {
  const [payerBefore, payeeBefore] = await balances()
  const res = await prove(3)
  t.equal(res.status, 200)
  t.same(await res.json(), { proved: true })
  const settled = decodePaymentResponseHeader(res.headers.get('payment-response')!)
  const used = 3n * 2n * PER_CREDIT
  t.match(settled, { success: true, amount: String(used), transaction: /^0x[0-9a-f]{64}$/ })
  t.same(await balances(), [payerBefore - used, payeeBefore + used], 'exactly the amount used, once')
})

t.test('a request that used more than the signed maximum pays the maximum, never more', async (t) => {
  const [payerBefore, payeeBefore] = await balances()
  const res = await prove(80) // 160 credits × 1000 = 160000 > 100000
  t.equal(res.status, 200)
  t.match(decodePaymentResponseHeader(res.headers.get('payment-response')!), { success: true, amount: String(MAXIMUM) })
  t.same(await balances(), [payerBefore - MAXIMUM, payeeBefore + MAXIMUM])
})
