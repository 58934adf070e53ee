/**
 * Paying by use through a real gateway process: a prove route whose credit meter charges 2 credits
 * per proof, behind an x402 paywall with `scheme: upto`. The official fetch wrapper (`@x402/fetch`
 * with the official `UptoEvmScheme`) signs a Permit2 maximum; the gateway settles exactly what the
 * request used (credits × pricePerCredit), capped at the maximum, checked on chain.
 * A second route meters in two phases (reserve 50 credits, charge what the upstream measured):
 * upto settles the measured credits, and the answer carries a signed receipt that
 * `tollgate receipt verify` accepts, and refuses once altered.
 */
import t from 'tap'
import { generateKeyPairSync, randomBytes } from 'node:crypto'
import { spawn } from 'node:child_process'
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { BIN } from '../helpers/gateway-process.ts'
import { tempDir } from '../helpers/temp.ts'
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
const RECEIPT_KEY = generateKeyPairSync('ed25519').privateKey.export({ format: 'pem', type: 'pkcs8' }).toString()
const WORK_UNITS = 7n
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
  - name: paid-work
    methods: [POST]
    path: /work/:apiKey
    rewrite: /work
    upstream: prover
    errorFormat: x402
    plugins:
      - { name: key-in-path-auth, config: { param: apiKey, scope: zkpaas } }
      - { name: credit-meter, config: { apiType: PRIVNET_ZKPAAS, cost: 50, actual: { header: x-work-units } } }
      - name: x402-paywall
        config:
          scheme: upto
          price: "${MAXIMUM}"
          pricePerCredit: "${PER_CREDIT}"
          payTo: "${accounts.payee.address}"
          description: work, paid as measured
          networks:
            - network: eip155:84532
              asset: { address: "${f.chain.token}", name: USDC, version: "2", decimals: 6 }
              facilitator: { rpcUrl: "${f.chain.rpcUrl}", signerKeyEnv: X402_FACILITATOR_KEY, pollingIntervalMs: 50 }
      - { name: receipt, config: { kid: "did:web:gateway.test#receipt-1" } }
`
}

t.before(async () => {
  prover = createServer((req, res) => {
    req.resume()
    // /work measures its own work and reports it, as an upstream priced by use does.
    const measured = req.url === '/work' ? { 'x-work-units': String(WORK_UNITS) } : {}
    req.on('end', () => res.writeHead(200, { 'content-type': 'application/json', ...measured }).end('{"proved":true}'))
  })
  await new Promise<void>((resolve) => prover.listen(0, '127.0.0.1', resolve))
  gw = await startGatewayProcess(config(`http://127.0.0.1:${(prover.address() as AddressInfo).port}`), {
    env: { X402_FACILITATOR_KEY: accounts.facilitator.privateKey, TOLLGATE_RECEIPT_KEY: RECEIPT_KEY },
    startTimeoutMs: 90_000,
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
  // The bazaar (discovery) extension, as the SDK's declareDiscoveryExtension writes it.
  t.match(required.extensions, { bazaar: { info: { input: { type: 'http', method: 'POST', bodyType: 'json' }, output: { type: 'json' } }, schema: { type: 'object', required: ['input'] } } })
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

function cli(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [BIN, ...args], { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, TOLLGATE_RECEIPT_KEY: '' } })
    let stdout = ''
    let stderr = ''
    child.stdout.on('data', (chunk) => (stdout += chunk))
    child.stderr.on('data', (chunk) => (stderr += chunk))
    child.on('exit', (code) => resolve({ code, stdout, stderr }))
  })
}

t.test('two-phase upto: reserved 50 credits, the upstream measured 7, the payment settles 7 × pricePerCredit, with a signed receipt', async (t) => {
  const [payerBefore, payeeBefore] = await balances()
  const res = await payingFetch()(`${gw.url}/work/${KEY}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' })
  t.equal(res.status, 200)
  await res.text()
  const used = WORK_UNITS * PER_CREDIT
  t.equal(res.headers.get('x-credits-reserved'), '50')
  t.equal(res.headers.get('x-credits-charged'), String(WORK_UNITS))
  const settled = decodePaymentResponseHeader(res.headers.get('payment-response')!) as any
  t.match(settled, { success: true, amount: String(used) })
  t.same(await balances(), [payerBefore - used, payeeBefore + used], 'the measured use, not the reservation')

  // The receipt: in the header, and inside PAYMENT-RESPONSE where the offer-and-receipt extension puts it.
  const jws = res.headers.get('x-receipt')!
  t.match(jws, /^[\w-]+\.[\w-]+\.[\w-]+$/)
  t.same(settled.extensions['offer-receipt'].info, { version: 1, receipt: { format: 'jws', signature: jws } })
  const keysRes = await fetch(`${gw.url}/.well-known/tollgate-receipt-keys.json`)
  t.equal(keysRes.status, 200)
  const keys = await keysRes.json() as { keys: { kid: string; x: string }[] }
  t.match(keys.keys, [{ kty: 'OKP', crv: 'Ed25519', kid: 'did:web:gateway.test#receipt-1', alg: 'EdDSA' }])
  t.notMatch(JSON.stringify(keys), /"d"/, 'no private part published')

  const dir = tempDir('tollgate-receipt-')
  const keysFile = join(dir, 'keys.json')
  writeFileSync(keysFile, JSON.stringify(keys))
  const ok = await cli(['receipt', 'verify', jws, '--keys', keysFile, '--json'])
  t.equal(ok.code, 0, ok.stderr)
  const verdict = JSON.parse(ok.stdout)
  t.match(verdict, {
    valid: true, kid: 'did:web:gateway.test#receipt-1',
    payload: { network: 'eip155:84532', payer: accounts.payer.address, amount: String(used), transaction: settled.transaction, requestId: res.headers.get('x-request-id'), project: 'metered' },
  })
  t.match(verdict.payload.resourceUrl, /\/work\/\*\*\*$/, 'the key in the path is masked in the receipt')
  t.ok(Math.abs(verdict.payload.issuedAt - Date.now() / 1000) < 120)
  // Against the gateway's URL too (what an agent does online).
  t.equal((await cli(['receipt', 'verify', jws, '--keys', `${gw.url}/.well-known/tollgate-receipt-keys.json`])).code, 0)

  // Tampered: a payload that says it paid less, with the same signature.
  const [head, body, sig] = jws.split('.')
  const altered = JSON.parse(Buffer.from(body, 'base64url').toString())
  altered.amount = '1'
  const forged = `${head}.${Buffer.from(JSON.stringify(altered)).toString('base64url')}.${sig}`
  const bad = await cli(['receipt', 'verify', forged, '--keys', keysFile])
  t.equal(bad.code, 1)
  t.match(bad.stderr, /invalid receipt: bad signature/)
  // Signed by another key under the same kid.
  const other = generateKeyPairSync('ed25519').publicKey.export({ format: 'jwk' }) as { x: string }
  const otherFile = join(dir, 'other.json')
  writeFileSync(otherFile, JSON.stringify({ keys: [{ ...keys.keys[0], x: other.x }] }))
  t.equal((await cli(['receipt', 'verify', jws, '--keys', otherFile])).code, 1)
  // Usage mistakes exit 2, naming the flag.
  const missing = await cli(['receipt', 'verify', jws])
  t.equal(missing.code, 2)
  t.match(missing.stderr, /--keys is required/)
  const typo = await cli(['receipt', 'verify', jws, '--key', keysFile])
  t.equal(typo.code, 2)
  t.match(typo.stderr, /did you mean --keys\?/)
  t.equal((await cli(['receipt', 'verify', '--help'])).code, 0)
})
