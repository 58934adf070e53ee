/**
 * The x402 facilitator's upstream mode and its behaviour when a chain RPC is down, through real
 * gateway processes: gateway A forwards base/testnet to gateway B (which settles in process on a
 * local chain), polygon to broken or absent facilitators, and serves ethereum/testnet in process
 * from an RPC that only comes up after A has started.
 */
import t from 'tap'
import { randomBytes } from 'node:crypto'
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { startLocalChain, type LocalChain } from '../../examples/chain/index.ts'
import { projectsYaml } from '../helpers/privnet.ts'
import { startGatewayProcess, type GatewayProcess } from '../helpers/gateway-process.ts'
import { closedPort } from '../helpers/upstream.ts'
import { call, x402Config, x402Env } from '../helpers/x402.ts'
import { bodyV2, now, price, requirementsV2, sdkBodyV2, sdkSigner, signAuthorization, startFixture } from '../plugins/x402-facilitator/evm-helpers.ts'

const KEY = `xk_up_${randomBytes(10).toString('hex')}`
const f = await startFixture(84532)
const payer = sdkSigner(f.chain.accounts.payer.privateKey)
let gwB: GatewayProcess
let gwA: GatewayProcess
let broken: Server
let sepoliaPort: number
let sepolia: LocalChain | undefined

/** A facilitator that answers everything wrong: 500 on verify, non-JSON on settle, no kinds on supported. */
function startBrokenFacilitator(): Promise<Server> {
  const server = createServer((req, res) => {
    req.resume()
    req.on('end', () => {
      if (req.url?.endsWith('/verify')) return void res.writeHead(500, { 'content-type': 'application/json' }).end('{"error":"Cannot read properties of undefined (reading \'scheme\')"}')
      if (req.url?.endsWith('/settle')) return void res.writeHead(200, { 'content-type': 'text/html' }).end('<html>gateway timeout</html>')
      res.writeHead(200, { 'content-type': 'application/json' }).end('{"kinds":"none"}')
    })
  })
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(server)))
}

function gatewayA(bUrl: string, brokenUrl: string, gonePort: number): string {
  return `version: 1
server: { listen: { host: 127.0.0.1, port: 0 } }
admin: { listen: { host: 127.0.0.1, port: 0 } }
store: { dataDir: "{{DIR}}/data" }
${projectsYaml([{ id: 'payments', key: KEY, scopes: ['x402'], allocation: 100000 }])}
upstreams:
  facilitator-b: { url: "${bUrl}/x402/base/testnet/${KEY}" }
  broken: { url: "${brokenUrl}" }
  gone: { url: "http://127.0.0.1:${gonePort}", timeouts: { connectMs: 500 } }
routes:
  - name: x402-facilitator
    methods: [GET, POST]
    path: /x402/:chain/:network/:apiKey/:endpoint
    apiType: x402
    errorFormat: x402
    handler:
      name: x402-facilitator
      config:
        recheckIntervalMs: 200
        networks:
          base: { testnet: { upstream: facilitator-b } }
          polygon: { testnet: { upstream: broken }, mainnet: { upstream: gone } }
          ethereum:
            testnet:
              rpcUrl: "http://127.0.0.1:${sepoliaPort}"
              signerKeyEnv: X402_FACILITATOR_KEY
              assets: [{ address: "${f.chain.token}", name: USDC, version: "2", decimals: 6 }]
              pollingIntervalMs: 50
              rpcTimeoutMs: 2000
    plugins:
      - { name: key-in-path-auth, config: { param: apiKey, scope: x402 } }
      - { name: credit-meter, config: { apiType: x402, cost: 1 } }
`
}

t.before(async () => {
  gwB = await startGatewayProcess(x402Config([{ id: 'payments', key: KEY, scopes: ['x402'], allocation: 100000 }]), { env: x402Env(f.chain) })
  broken = await startBrokenFacilitator()
  sepoliaPort = await closedPort()
  const brokenUrl = `http://127.0.0.1:${(broken.address() as AddressInfo).port}`
  gwA = await startGatewayProcess(gatewayA(gwB.url, brokenUrl, await closedPort()), {
    env: { X402_FACILITATOR_KEY: f.chain.accounts.facilitator.privateKey },
  })
})
t.teardown(async () => {
  await gwA?.stop('SIGKILL')
  await gwB?.stop('SIGKILL')
  await new Promise((resolve) => broken?.close(resolve))
  await sepolia?.close()
  await f.close()
})

const at = (gw: GatewayProcess, path: string, endpoint: string) => `${gw.url}/x402/${path}/${KEY}/${endpoint}`
const failed = { error: 'x402 Payment request failed', code: 'payment_request_failed' }

t.test('upstream mode: a second gateway forwards verify, settle, supported and health to the first', async (t) => {
  const viaA = await call(at(gwA, 'base/testnet', 'supported'))
  t.equal(viaA.status, 200)
  t.same(viaA.json(), (await call(at(gwB, 'base/testnet', 'supported'))).json(), 'the same kinds and signers as the upstream')
  t.same((await call(at(gwA, 'base/testnet', 'health'))).json(), { status: 'ok' })

  const body = await sdkBodyV2(f, payer)
  const verified = await call(at(gwA, 'base/testnet', 'verify'), { body })
  t.equal(verified.status, 200)
  t.same(verified.json(), { isValid: true, invalidReason: null, payer: f.chain.accounts.payer.address })
  const payeeBefore = await f.balanceOf(f.chain.accounts.payee.address)
  const settled = await call(at(gwA, 'base/testnet', 'settle'), { body })
  t.equal(settled.status, 200)
  t.match(settled.json(), { success: true, network: 'eip155:84532', transaction: /^0x[0-9a-f]{64}$/ })
  t.equal(await f.balanceOf(f.chain.accounts.payee.address), payeeBefore + BigInt(price))
  t.ok(gwB.output.some((line) => line.includes('"event":"x402_broadcast"')), 'the upstream gateway broadcast it')
  t.notOk(gwA.output.some((line) => line.includes('"event":"x402_broadcast"')), 'the forwarding gateway did not')

  const expired = bodyV2(requirementsV2(f), await signAuthorization(f, { validBefore: now() - 5 }))
  const verdict = await call(at(gwA, 'base/testnet', 'verify'), { body: expired })
  t.equal(verdict.status, 200, "the upstream's verdicts pass through")
  t.match(verdict.json(), { isValid: false, invalidReason: 'invalid_exact_evm_payload_authorization_valid_before' })
  const schema = await call(at(gwA, 'base/testnet', 'settle'), { body: { ...body, paymentRequirements: { ...body.paymentRequirements, payTo: 'nobody' } } })
  t.equal(schema.status, 400, "so do the upstream's 400s")
  t.match(schema.json(), { success: false, errorReason: 'invalid_payload', errorMessage: /paymentRequirements\.payTo must be 0x followed by 40 hex digits/ })
  const envelope = await call(at(gwA, 'base/testnet', 'verify'), { body: { x402Version: 2, paymentPayload: 'x' } })
  t.equal(envelope.status, 400, 'a body that is not a facilitator request at all is refused before the upstream')
  t.same(envelope.json(), {
    isValid: false, invalidReason: 'invalid_payload', invalidMessage: 'paymentPayload is required and must be an object', payer: '', details: { field: 'paymentPayload' },
  })
  const empty = await call(at(gwA, 'base/testnet', 'verify'), { method: 'POST' })
  t.same(empty.json(), { error: 'x402 request body is required', code: 'body_required' })
})

t.test('upstream failures answer 502 "x402 Payment request failed"', async (t) => {
  const body = await sdkBodyV2(f, payer)
  for (const path of ['polygon/testnet', 'polygon/mainnet']) {
    for (const [endpoint, options] of [['verify', { body }], ['settle', { body }], ['supported', {}]] as const) {
      const res = await call(at(gwA, path, endpoint), options)
      t.equal(res.status, 502, `${path} ${endpoint}`)
      t.same(res.json(), failed)
    }
    const health = await call(at(gwA, path, 'health'))
    t.equal(health.status, 503)
    t.same(health.json(), { status: 'unavailable', error: `${path} is unavailable: the upstream facilitator does not answer` })
  }
  t.ok(gwA.output.some((line) => line.includes('x402 upstream facilitator failed') && line.includes('answered HTTP 500')), 'the cause is logged')
})

t.test('a chain RPC down at start: the gateway starts, the network answers 503, and serves once the RPC is up', async (t) => {
  const health = await call(at(gwA, 'ethereum/testnet', 'health'))
  t.equal(health.status, 503)
  t.same(health.json(), { status: 'unavailable', error: 'ethereum/testnet is unavailable: its chain RPC does not answer' })
  const sepoliaF = { chain: f.chain, v2Network: 'eip155:11155111', v1Network: 'sepolia' } as any
  const refused = await call(at(gwA, 'ethereum/testnet', 'verify'), { body: await sdkBodyV2(sepoliaF, payer) })
  t.equal(refused.status, 503)
  t.same(refused.json(), { error: 'ethereum/testnet is unavailable: its chain RPC does not answer', code: 'network_unavailable' })
  t.equal(refused.headers['retry-after'], '1')
  t.ok(gwA.output.some((line) => line.includes('x402 network unavailable at start')), 'the start-up problem is logged')

  sepolia = await startLocalChain({ port: sepoliaPort, chainId: 11155111 })
  t.equal(sepolia.token, f.chain.token, 'the token lands at the configured (deterministic) address')
  let status = 0
  for (let i = 0; i < 100 && status !== 200; i++) {
    await new Promise((resolve) => setTimeout(resolve, 100))
    status = (await call(at(gwA, 'ethereum/testnet', 'health'))).status
  }
  t.equal(status, 200, 'healthy once the RPC answers')
  const onSepolia = { chain: sepolia, v2Network: 'eip155:11155111', v1Network: 'sepolia' } as any
  const body = await sdkBodyV2(onSepolia, payer)
  t.same((await call(at(gwA, 'ethereum/testnet', 'verify'), { body })).json(), { isValid: true, invalidReason: null, payer: sepolia.accounts.payer.address })
  t.match((await call(at(gwA, 'ethereum/testnet', 'settle'), { body })).json(), { success: true, network: 'eip155:11155111' })
  const supported = (await call(at(gwA, 'ethereum/testnet', 'supported'))).json()
  t.same(supported.kinds.map((k: any) => [k.x402Version, k.scheme, k.network]),
    [[1, 'exact', 'sepolia'], [2, 'exact', 'eip155:11155111'], [2, 'upto', 'eip155:11155111']],
    'the spec example: sepolia (v1) and eip155:11155111 (v2), plus upto (v2)')
})
