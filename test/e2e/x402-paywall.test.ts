/**
 * The x402 paywall through a real gateway process running examples/config/x402.yaml (its paid
 * route, in front of a test upstream) on a local chain: the 402 answer (v2 header, v1 body, CORS),
 * payments made with the official fetch wrapper (`wrapFetchWithPayment` from `@x402/fetch`, v2 and
 * v1) and with the SDK's HTTP client (`x402HTTPClient`), refusals, no settlement when the upstream
 * fails, content withheld when settlement fails, settlement_pending and its retry, one payment used
 * twice at once, and a paywall that uses another gateway's facilitator over HTTP.
 *
 * The other cases use `payAndFetch` below rather than the wrapper because they need what the wrapper
 * hides: the payment header it sent (to replay it) and the settle header of a 402 answer.
 */
import t from 'tap'
import { randomBytes } from 'node:crypto'
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { x402Client, x402HTTPClient } from '@x402/core/client'
import { decodePaymentResponseHeader, wrapFetchWithPayment } from '@x402/fetch'
import { ExactEvmScheme } from '@x402/evm/exact/client'
import { ExactEvmSchemeV1 } from '@x402/evm/exact/v1/client'
import { createWalletClient, http, parseAbi, type LocalAccount } from 'viem'
import { privateKeyToAccount } from 'viem/accounts'
import { startGatewayProcess, type GatewayProcess } from '../helpers/gateway-process.ts'
import { call, decodeHeader, x402Config, x402Env } from '../helpers/x402.ts'
import { bazaarExtension } from '../../plugins/x402-paywall/bazaar.ts'
import { now, price, requirementsV2, signAuthorization, startFixture } from '../plugins/x402-facilitator/evm-helpers.ts'

const KEY = `xk_pw_${randomBytes(10).toString('hex')}`
const CONTENT = JSON.stringify({ data: 'paid content' })
const f = await startFixture(84532)
const { accounts } = f.chain
const tokenAbi = parseAbi(['function mint(address, uint256)', 'function transfer(address, uint256) returns (bool)', 'function balanceOf(address) view returns (uint256)'])
const wallet = (key: `0x${string}`) => createWalletClient({ account: privateKeyToAccount(key), chain: f.chain.viemChain, transport: http(f.chain.rpcUrl, { retryCount: 0 }) })
const mined = (hash: `0x${string}`) => f.ctx.publicClient.waitForTransactionReceipt({ hash, pollingInterval: 20 })

let upstream: Server
const upstreamSaw: { url: string; headers: Record<string, unknown> }[] = []
let stalled = false
let gw: GatewayProcess
let remote: GatewayProcess

/** The paid service: `/ok`, `/missing` (404), `/big` (2 MB), `/drain` (the poor payer spends its tokens first), `/stall` (mining stops once). */
function startContentUpstream(): Promise<Server> {
  const server = createServer(async (req, res) => {
    req.resume()
    upstreamSaw.push({ url: req.url!, headers: req.headers })
    if (req.url!.endsWith('/missing')) return void res.writeHead(404, { 'content-type': 'application/json' }).end('{"error":"no such thing"}')
    if (req.url!.endsWith('/big')) return void res.writeHead(200, { 'content-type': 'text/plain' }).end(Buffer.alloc(2 * 1024 * 1024, 97))
    if (req.url!.endsWith('/drain')) {
      const poor = wallet(accounts.poor.privateKey)
      const held = await f.balanceOf(accounts.poor.address)
      await mined(await poor.writeContract({ address: f.chain.token, abi: tokenAbi, functionName: 'transfer', args: [accounts.deployer.address, held] }))
    }
    if (req.url!.endsWith('/stall') && !stalled) {
      stalled = true
      await f.chain.request('evm_setAutomine', [false])
    }
    res.writeHead(200, { 'content-type': 'application/json' }).end(CONTENT)
  })
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(server)))
}

function remotePaywall(contentUrl: string, facilitatorUrl: string): string {
  return `version: 1
server: { listen: { host: 127.0.0.1, port: 0 } }
admin: { listen: { host: 127.0.0.1, port: 0 } }
store: { dataDir: "{{DIR}}/data" }
upstreams:
  content: { url: "${contentUrl}" }
  facilitator: { url: "${facilitatorUrl}" }
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
          payTo: "${accounts.payee.address}"
          description: remote-facilitated content
          networks:
            - network: base-sepolia
              asset: { address: "${f.chain.token}", name: USDC, version: "2", decimals: 6 }
              facilitator: { upstream: facilitator }
`
}

t.before(async () => {
  upstream = await startContentUpstream()
  const contentUrl = `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`
  const config = x402Config([{ id: 'payments', key: KEY, scopes: ['x402'], allocation: 100000 }], (text) => text
    .replace('capacity: 50, refillPerSecond: 10', 'capacity: 1000, refillPerSecond: 100')
    // The paywall's receipt wait (16-space indent; the facilitator's is 14): short, for the pending case.
    .replace('                receiptTimeoutMs: 20000', '                receiptTimeoutMs: 1000'))
  gw = await startGatewayProcess(config, { env: x402Env(f.chain, { MIRROR_TESTNET_URL: contentUrl }) })
  remote = await startGatewayProcess(remotePaywall(contentUrl, `${gw.url}/x402/base/testnet/${KEY}`))
})
t.teardown(async () => {
  await remote?.stop('SIGKILL')
  await gw?.stop('SIGKILL')
  await new Promise((resolve) => upstream?.close(resolve))
  await f.close()
})

const paid = (path: string, base = gw.url) => `${base}/paid/mirror/${path}`
const payeeBalance = () => f.balanceOf(accounts.payee.address)

function sdkHttpClient(key: `0x${string}`, version: 1 | 2) {
  const account = privateKeyToAccount(key) as LocalAccount
  const scheme = version === 2
    ? { network: 'eip155:84532' as const, client: new ExactEvmScheme(account) }
    : { network: 'base-sepolia' as `${string}:${string}`, client: new ExactEvmSchemeV1(account), x402Version: 1 }
  return new x402HTTPClient(x402Client.fromConfig({ schemes: [scheme], spendControls: false }))
}

/** What a fetch wrapper does: on 402, pay with the SDK and send again. v1 reads the JSON body only. */
async function payAndFetch(url: string, options: { key?: `0x${string}`; version?: 1 | 2 } = {}) {
  const version = options.version ?? 2
  const client = sdkHttpClient(options.key ?? accounts.payer.privateKey, version)
  const first = await fetch(url)
  if (first.status !== 402) throw new Error(`expected 402, got ${first.status}`)
  const body = await first.json()
  const required = client.getPaymentRequiredResponse((name) => (version === 2 ? first.headers.get(name) : null), body)
  const payment = await client.createPaymentPayload(required)
  const paymentHeaders = client.encodePaymentSignatureHeader(payment)
  const second = await fetch(url, { headers: paymentHeaders })
  const text = await second.text()
  const settle = second.headers.get('payment-response') || second.headers.get('x-payment-response')
    ? client.getPaymentSettleResponse((name) => second.headers.get(name))
    : undefined
  return { status: second.status, text, headers: second.headers, settle, paymentHeaders }
}

t.test('without a payment: 402 with PAYMENT-REQUIRED (v2) and the v1 body; CORS exposes the payment headers', async (t) => {
  const res = await call(paid('ok'), { headers: { origin: 'https://app.example' } })
  t.equal(res.status, 402)
  t.equal(res.headers['access-control-expose-headers'], 'PAYMENT-REQUIRED, PAYMENT-RESPONSE, X-PAYMENT-RESPONSE')
  t.equal(res.headers['access-control-allow-origin'], '*')
  t.equal(res.headers['cache-control'], 'no-store')
  const offer = { scheme: 'exact', asset: f.chain.token, payTo: accounts.payee.address, maxTimeoutSeconds: 60, extra: { name: 'USDC', version: '2' } }
  t.same(decodeHeader(res.headers['payment-required']), {
    x402Version: 2,
    error: 'PAYMENT-SIGNATURE header is required',
    resource: { url: paid('ok'), description: 'Mirror-node data, paid per request', mimeType: 'application/json' },
    accepts: [{ ...offer, network: 'eip155:84532', amount: price }],
    // The discovery (bazaar) extension, as the SDK's declareDiscoveryExtension writes it (bazaar.ts).
    extensions: { bazaar: bazaarExtension('GET', 'application/json') },
  })
  t.match(decodeHeader(res.headers['payment-required']).extensions.bazaar.info, { input: { type: 'http', method: 'GET' }, output: { type: 'json' } })
  t.same(res.json(), {
    x402Version: 1,
    error: 'X-PAYMENT header is required',
    accepts: [{
      ...offer, network: 'base-sepolia', maxAmountRequired: price, resource: paid('ok'),
      description: 'Mirror-node data, paid per request', mimeType: 'application/json', outputSchema: null,
    }],
  })
  const preflight = await call(paid('ok'), { method: 'OPTIONS', headers: { origin: 'https://app.example', 'access-control-request-method': 'GET' } })
  t.equal(preflight.status, 204)
  t.match(preflight.headers['access-control-allow-headers'], /PAYMENT-SIGNATURE, X-PAYMENT/)
  t.equal(upstreamSaw.length, 0, 'nothing reached the upstream')
})

t.test('the official v2 client pays and gets the content; PAYMENT-RESPONSE names the transaction', async (t) => {
  const before = await payeeBalance()
  const res = await payAndFetch(paid('ok'))
  t.equal(res.status, 200)
  t.equal(res.text, CONTENT)
  t.match(res.settle, { success: true, network: 'eip155:84532', payer: accounts.payer.address, transaction: /^0x[0-9a-f]{64}$/ })
  t.equal(await payeeBalance(), before + BigInt(price), 'paid once')
  const seen = upstreamSaw.at(-1)!
  t.equal(seen.url, '/api/v1/ok')
  t.notOk(seen.headers['payment-signature'] ?? seen.headers['x-payment'], 'the payment header is not forwarded')
  t.ok(gw.output.some((line) => line.includes(res.settle!.transaction) && line.includes('"event":"x402_broadcast"')), 'the broadcast is logged')

  const replay = await fetch(paid('ok'), { headers: res.paymentHeaders })
  t.equal(replay.status, 402, 'the same payment cannot be used again')
  t.match(decodeHeader(replay.headers.get('payment-required')!), { error: 'invalid_exact_evm_nonce_already_used' })
  t.equal(await payeeBalance(), before + BigInt(price))
})

t.test('the official v1 client pays with X-PAYMENT and gets X-PAYMENT-RESPONSE', async (t) => {
  const before = await payeeBalance()
  const res = await payAndFetch(paid('ok'), { version: 1 })
  t.ok(res.paymentHeaders['X-PAYMENT'], 'sent as X-PAYMENT')
  t.equal(res.status, 200)
  t.equal(res.text, CONTENT)
  t.ok(res.headers.get('x-payment-response'))
  t.notOk(res.headers.get('payment-response'))
  t.match(res.settle, { success: true, network: 'base-sepolia', payer: accounts.payer.address })
  t.equal(await payeeBalance(), before + BigInt(price))
})

t.test('the official fetch wrapper (v2) pays a paywalled route end to end', async (t) => {
  const account = privateKeyToAccount(accounts.payer.privateKey) as LocalAccount
  // The local token is no default asset of the SDK, so the buyer opts in to it with a per-payment cap.
  const buyer = new x402Client()
    .register('eip155:84532', new ExactEvmScheme(account))
    .setSpendControls({ allowedAssets: [{ network: 'eip155:84532', asset: f.chain.token, maxAmountPerPayment: price }] })
  const fetchWithPayment = wrapFetchWithPayment(fetch, buyer)
  const [payeeBefore, payerBefore] = [await payeeBalance(), await f.balanceOf(accounts.payer.address)]
  const seen = upstreamSaw.length

  const res = await fetchWithPayment(paid('ok'))
  t.equal(res.status, 200)
  t.equal(await res.text(), CONTENT)
  const settle = decodePaymentResponseHeader(res.headers.get('payment-response')!)
  t.match(settle, { success: true, network: 'eip155:84532', payer: accounts.payer.address, transaction: /^0x[0-9a-f]{64}$/ })
  t.equal(await payeeBalance(), payeeBefore + BigInt(price), 'the payee got exactly the price')
  t.equal(await f.balanceOf(accounts.payer.address), payerBefore - BigInt(price), 'the payer paid exactly the price')
  t.equal(upstreamSaw.length, seen + 1, 'the upstream answered once: the unpaid try stopped at the paywall')
  t.notOk(upstreamSaw.at(-1)!.headers['payment-signature'], 'the payment header is not forwarded')
  const receipt = await f.ctx.publicClient.getTransactionReceipt({ hash: settle.transaction as `0x${string}` })
  t.equal(receipt.status, 'success', 'the transaction named in PAYMENT-RESPONSE is mined')
})

t.test('the official fetch wrapper (v1) pays with X-PAYMENT when the 402 has only the v1 body', async (t) => {
  // The wrapper prefers the v2 PAYMENT-REQUIRED header whenever it is there; a v1 buyer meets a
  // v1-only 402, so this fetch drops that header (and nothing else) before the wrapper reads it.
  const v1Only: typeof fetch = async (input, init) => {
    const res = await fetch(input, init)
    if (res.status !== 402) return res
    const headers = new Headers(res.headers)
    headers.delete('payment-required')
    return new Response(await res.arrayBuffer(), { status: 402, headers })
  }
  const account = privateKeyToAccount(accounts.payer.privateKey) as LocalAccount
  const buyer = new x402Client()
    .registerV1('base-sepolia', new ExactEvmSchemeV1(account))
    .setSpendControls({ allowedAssets: [{ network: 'base-sepolia' as `${string}:${string}`, asset: f.chain.token, maxAmountPerPayment: price }] })
  const fetchWithPayment = wrapFetchWithPayment(v1Only, buyer)
  const [payeeBefore, payerBefore] = [await payeeBalance(), await f.balanceOf(accounts.payer.address)]

  const res = await fetchWithPayment(paid('ok'))
  t.equal(res.status, 200)
  t.equal(await res.text(), CONTENT)
  t.notOk(res.headers.get('payment-response'))
  const settle = decodePaymentResponseHeader(res.headers.get('x-payment-response')!)
  t.match(settle, { success: true, network: 'base-sepolia', payer: accounts.payer.address, transaction: /^0x[0-9a-f]{64}$/ })
  t.ok(upstreamSaw.at(-1)!.url === '/api/v1/ok' && !upstreamSaw.at(-1)!.headers['x-payment'], 'served without forwarding X-PAYMENT')
  t.equal(await payeeBalance(), payeeBefore + BigInt(price), 'the payee got exactly the price')
  t.equal(await f.balanceOf(accounts.payer.address), payerBefore - BigInt(price), 'the payer paid exactly the price')
})

/** A v2 PAYMENT-SIGNATURE header for the offered requirements, signed with viem. */
async function header(signed: Awaited<ReturnType<typeof signAuthorization>>, accepted = requirementsV2(f)) {
  const payload = { x402Version: 2, resource: { url: paid('ok') }, accepted, payload: signed }
  return { 'payment-signature': Buffer.from(JSON.stringify(payload)).toString('base64') }
}

t.test('invalid payments get 402 with the reason and never reach the upstream', async (t) => {
  const seen = upstreamSaw.length
  const cases: [string, Record<string, string>, string][] = [
    ['expired', await header(await signAuthorization(f, { validBefore: now() - 5 })), 'invalid_exact_evm_payload_authorization_valid_before'],
    ['wrong amount', await header(await signAuthorization(f, { value: '1' })), 'invalid_exact_evm_payload_authorization_value_mismatch'],
    ['insufficient balance', await header(await signAuthorization(f, { key: accounts.poor.privateKey })), 'invalid_exact_evm_insufficient_balance'],
    ['other terms', await header(await signAuthorization(f), requirementsV2(f, { amount: '1' })), 'No matching payment requirements'],
    ['not base64', { 'payment-signature': '%%%' }, 'PAYMENT-SIGNATURE header must be base64-encoded JSON'],
    ['wrong version', { 'x-payment': Buffer.from('{"x402Version":2}').toString('base64') }, 'X-PAYMENT carries x402Version 2; expected 1'],
  ]
  for (const [name, headers, error] of cases) {
    const res = await call(paid('ok'), { headers })
    t.equal(res.status, 402, name)
    t.equal(decodeHeader(res.headers['payment-required']).error, error, `${name}: ${error}`)
    t.equal(res.json().error, error)
  }
  t.equal(upstreamSaw.length, seen)
})

t.test('an upstream answer ≥ 400 is passed on unsettled; the payment stays usable', async (t) => {
  const before = await payeeBalance()
  const client = sdkHttpClient(accounts.payer.privateKey, 2)
  const first = await fetch(paid('missing'))
  const payment = await client.createPaymentPayload(client.getPaymentRequiredResponse((n) => first.headers.get(n), await first.json()))
  const headers = client.encodePaymentSignatureHeader(payment)
  const missing = await fetch(paid('missing'), { headers })
  t.equal(missing.status, 404)
  t.equal(await missing.text(), '{"error":"no such thing"}')
  t.notOk(missing.headers.get('payment-response'))
  t.equal(await payeeBalance(), before, 'nothing settled')
  const big = await fetch(paid('big'), { headers })
  t.equal(big.status, 502, 'an answer over maxResponseBodyBytes is not released')
  t.match(await big.json(), { code: 'upstream_response_too_large' })
  t.equal(await payeeBalance(), before, 'nothing settled')
  // The resource URL is not part of the v2 match, so the same authorization pays for /ok.
  const ok = await fetch(paid('ok'), { headers })
  t.equal(ok.status, 200)
  t.equal(await payeeBalance(), before + BigInt(price))
})

t.test('a settlement that fails after the upstream answered: 402, content withheld', async (t) => {
  const deployer = wallet(accounts.deployer.privateKey)
  await mined(await deployer.writeContract({ address: f.chain.token, abi: tokenAbi, functionName: 'mint', args: [accounts.poor.address, BigInt(price)] }))
  const res = await payAndFetch(paid('drain'), { key: accounts.poor.privateKey })
  t.equal(res.status, 402)
  t.notMatch(res.text, 'paid content', 'the content is not released')
  t.match(res.settle, { success: false, errorReason: 'invalid_exact_evm_insufficient_balance', transaction: '' })
  t.match(decodeHeader(res.headers.get('payment-required')!), { error: 'invalid_exact_evm_insufficient_balance', accepts: [{ network: 'eip155:84532' }] })
  t.equal(upstreamSaw.at(-1)!.url, '/api/v1/drain', 'the upstream did answer')
})

t.test('settlement_pending: 402 with the transaction hash; a retry with the same payment gets the content once mined', async (t) => {
  t.teardown(() => f.chain.request('evm_setAutomine', [true]))
  const before = await payeeBalance()
  const res = await payAndFetch(paid('stall'))
  t.equal(res.status, 402)
  t.match(res.settle, { success: false, errorReason: 'settlement_pending', transaction: /^0x[0-9a-f]{64}$/ })
  t.notMatch(res.text, 'paid content')
  await f.chain.request('evm_setAutomine', [true])
  await f.chain.request('evm_mine', [])
  t.equal(await payeeBalance(), before + BigInt(price), 'the pending transfer landed')

  const retry = await fetch(paid('stall'), { headers: res.paymentHeaders })
  t.equal(retry.status, 200, 'the same payment header now gets the content')
  t.equal(await retry.text(), CONTENT)
  t.match(decodeHeader(retry.headers.get('payment-response')!), { success: true, transaction: res.settle!.transaction })
  const again = await fetch(paid('stall'), { headers: res.paymentHeaders })
  t.equal(again.status, 402, 'but only once')
  t.equal(await payeeBalance(), before + BigInt(price), 'and nothing more is paid')
})

t.test('one payment sent five times at once releases the content once', async (t) => {
  const before = await payeeBalance()
  const client = sdkHttpClient(accounts.payer.privateKey, 2)
  const first = await fetch(paid('ok'))
  const payment = await client.createPaymentPayload(client.getPaymentRequiredResponse((n) => first.headers.get(n), await first.json()))
  const headers = client.encodePaymentSignatureHeader(payment)
  const answers = await Promise.all(Array.from({ length: 5 }, () => fetch(paid('ok'), { headers }).then(async (r) => ({ status: r.status, text: await r.text() }))))
  t.equal(answers.filter((a) => a.status === 200 && a.text === CONTENT).length, 1, answers.map((a) => a.status).join(','))
  t.ok(answers.every((a) => a.status === 200 || a.status === 402))
  t.equal(await payeeBalance(), before + BigInt(price))
})

t.test('a paywall on another gateway verifies and settles through this gateway’s facilitator route', async (t) => {
  const before = await payeeBalance()
  const res = await payAndFetch(`${remote.url}/paid/ok`)
  t.equal(res.status, 200)
  t.equal(res.text, CONTENT)
  t.match(res.settle, { success: true, network: 'eip155:84532' })
  t.equal(await payeeBalance(), before + BigInt(price))
  t.ok(gw.output.some((line) => line.includes(res.settle!.transaction) && line.includes('"event":"x402_broadcast"')), 'broadcast by the facilitator gateway')
  // Its access line is written when that exchange is done, which may be after this client got its answer.
  t.ok(await gw.waitFor(/^(?=.*"route":"x402-facilitator")(?=.*"x402":"base\/testnet\/settle")/, 5000), 'through its facilitator route')
  const v1 = await payAndFetch(`${remote.url}/paid/ok`, { version: 1 })
  t.equal(v1.status, 200)
  t.match(v1.settle, { success: true, network: 'base-sepolia' })
})

