/**
 * The x402 paywall taking Solana payments through a real gateway process, on the local SVM: the
 * 402 answer offers solana-testnet with the facilitator's fee payer, the official fetch wrapper
 * (`@x402/fetch` with the `@x402/svm` client, v2 and v1) pays end to end with balances checked on
 * the SVM, a replayed payment header releases nothing more, and a settlement that is not
 * confirmed in time answers 402 settlement_pending and is delivered on retry, paid once.
 */
import t from 'tap'
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { x402Client } from '@x402/core/client'
import { decodePaymentResponseHeader, wrapFetchWithPayment } from '@x402/fetch'
import { ExactSvmScheme } from '@x402/svm/exact/client'
import { ExactSvmSchemeV1 } from '@x402/svm/exact/v1/client'
import { startGatewayProcess, type GatewayProcess } from '../helpers/gateway-process.ts'
import { decodeHeader } from '../helpers/x402.ts'
import { network, price, startSvmFixture } from '../plugins/x402-facilitator/svm-helpers.ts'

const CONTENT = JSON.stringify({ data: 'paid content' })
const f = await startSvmFixture()
const payee = f.local.accounts.payee.address
let upstream: Server
let gw: GatewayProcess

function config(contentUrl: string): string {
  return `version: 1
server: { listen: { host: 127.0.0.1, port: 0 } }
admin: { listen: { host: 127.0.0.1, port: 0 } }
store: { dataDir: "{{DIR}}/data" }
upstreams:
  content: { url: "${contentUrl}" }
routes:
  - name: paid
    methods: [GET]
    path: /paid/*rest
    rewrite: /api/v1/*rest
    upstream: content
    errorFormat: x402
    plugins:
      - name: x402-paywall
        config:
          price: "${price}"
          payTo: "0x90F79bf6EB2c4f870365E785982E1f101E93b906"
          description: paid content on Solana
          networks:
            - network: solana-testnet
              asset: { address: "${f.local.mint}", decimals: 6 }
              payTo: "${payee}"
              facilitator:
                rpcUrl: "${f.local.rpcUrl}"
                signerKeyEnv: X402_SOLANA_FACILITATOR_KEY
                receiptTimeoutMs: 1000
                pollingIntervalMs: 50
`
}

t.before(async () => {
  upstream = await new Promise<Server>((resolve) => {
    const server = createServer((req, res) => {
      req.resume()
      res.writeHead(200, { 'content-type': 'application/json' }).end(CONTENT)
    })
    server.listen(0, '127.0.0.1', () => resolve(server))
  })
  gw = await startGatewayProcess(config(`http://127.0.0.1:${(upstream.address() as AddressInfo).port}`), {
    env: { X402_SOLANA_FACILITATOR_KEY: f.local.accounts.facilitator.secretKeyBase58 },
  })
})
t.teardown(async () => {
  await gw?.stop('SIGKILL')
  await new Promise((resolve) => upstream?.close(resolve))
  await f.close()
})

const paid = (path: string) => `${gw.url}/paid/${path}`
const allowed = [{ network: network as `${string}:${string}`, asset: f.local.mint as string, maxAmountPerPayment: price }]

t.test('the 402 answer offers solana-testnet with the fee payer', async (t) => {
  const res = await fetch(paid('ok'))
  t.equal(res.status, 402)
  const required = decodeHeader(res.headers.get('payment-required')!)
  t.match(required.accepts, [{ scheme: 'exact', network, amount: price, asset: f.local.mint, payTo: payee, extra: { feePayer: f.feePayer } }])
  t.match(((await res.json()) as any).accepts, [{ network: 'solana-testnet', maxAmountRequired: price, extra: { feePayer: f.feePayer } }])
})

t.test('the official fetch wrapper (v2) pays end to end; funds move once', async (t) => {
  const buyer = new x402Client().register('solana:*', new ExactSvmScheme(f.payer, { rpcUrl: f.local.rpcUrl })).setSpendControls({ allowedAssets: allowed })
  const before = await f.local.tokenBalance(payee)
  const res = await wrapFetchWithPayment(fetch, buyer)(paid('ok'))
  t.equal(res.status, 200)
  t.equal(await res.text(), CONTENT)
  const settle = decodePaymentResponseHeader(res.headers.get('payment-response')!)
  t.match(settle, { success: true, network, payer: f.payer.address, transaction: /^[1-9A-HJ-NP-Za-km-z]{64,88}$/ })
  t.equal(await f.local.tokenBalance(payee), before + BigInt(price), 'the payee got exactly the price')
})

t.test('the official fetch wrapper (v1) pays with X-PAYMENT when the 402 has only the v1 body', async (t) => {
  const v1Only: typeof fetch = async (input, init) => {
    const res = await fetch(input, init)
    if (res.status !== 402) return res
    const headers = new Headers(res.headers)
    headers.delete('payment-required')
    return new Response(await res.arrayBuffer(), { status: 402, headers })
  }
  const buyer = new x402Client().registerV1('solana-testnet', new ExactSvmSchemeV1(f.payer, { rpcUrl: f.local.rpcUrl }))
    .setSpendControls({ allowedAssets: [{ network: 'solana-testnet' as `${string}:${string}`, asset: f.local.mint, maxAmountPerPayment: price }] })
  const before = await f.local.tokenBalance(payee)
  const res = await wrapFetchWithPayment(v1Only, buyer)(paid('ok'))
  t.equal(res.status, 200)
  t.match(decodePaymentResponseHeader(res.headers.get('x-payment-response')!), { success: true, network: 'solana-testnet' })
  t.equal(await f.local.tokenBalance(payee), before + BigInt(price))
})

/** Pays once with the SDK and returns the header it sent, so a test can replay it. */
async function paymentHeader(): Promise<string> {
  let sent = ''
  const spy: typeof fetch = async (input, init) => {
    const request = new Request(input, init)
    sent ||= request.headers.get('payment-signature') ?? ''
    if (request.headers.get('payment-signature')) return new Response('{}', { status: 599 })
    return fetch(request)
  }
  const buyer = new x402Client().register('solana:*', new ExactSvmScheme(f.payer, { rpcUrl: f.local.rpcUrl })).setSpendControls({ allowedAssets: allowed })
  await wrapFetchWithPayment(spy, buyer)(paid('ok')).catch(() => undefined)
  return sent
}

t.test('a replayed payment header releases nothing more', async (t) => {
  const header = await paymentHeader()
  t.ok(header, 'captured a payment header')
  const before = await f.local.tokenBalance(payee)
  const first = await fetch(paid('ok'), { headers: { 'payment-signature': header } })
  t.equal(first.status, 200)
  const replay = await fetch(paid('ok'), { headers: { 'payment-signature': header } })
  t.equal(replay.status, 402, 'the same payment does not release content twice')
  t.equal(await f.local.tokenBalance(payee), before + BigInt(price), 'paid once')
})

t.test('not confirmed in time: 402 settlement_pending, then delivered on retry, paid once', async (t) => {
  const header = await paymentHeader()
  const before = await f.local.tokenBalance(payee)
  f.local.front.hold()
  const pending = await fetch(paid('ok'), { headers: { 'payment-signature': header } })
  t.equal(pending.status, 402)
  t.match(decodePaymentResponseHeader(pending.headers.get('payment-response')!), { success: false, errorReason: 'settlement_pending' })
  f.local.front.release()
  const retry = await fetch(paid('ok'), { headers: { 'payment-signature': header } })
  t.equal(retry.status, 200, 'the retry with the same header is served')
  t.equal(await retry.text(), CONTENT)
  t.equal(await f.local.tokenBalance(payee), before + BigInt(price), 'paid once')
})
