/**
 * The gateway config of the key-purchase tests (a paid /keys/buy, a /keys/rekey bound to a public
 * origin, a metered route the bought key calls) and a fetch that records an agent's session.
 */
export const ORIGIN = 'https://api.tollgate.test'
const price = '10000'

export function buyKeyConfig(o: { upstream: string; store: string; network: string; asset: string; payTo: string; rpcUrl: string; keyEnv: string; chains: string[]; adminHash: string }): string {
  return `
version: 1
server: { listen: { host: 127.0.0.1, port: 0 } }
admin: { listen: { host: 127.0.0.1, port: 0 }, tokenHash: ${o.adminHash} }
${o.store}
watch: false
upstreams:
  echo: { url: '${o.upstream}' }
routes:
  - name: buy-key
    methods: [POST]
    path: /keys/buy
    errorFormat: x402
    handler: { name: key-buy, config: { unitsPerCredit: "100", plan: agent, scopes: [rpc] } }
    plugins:
      - name: x402-paywall
        config:
          intentHeader: x-buy-intent
          price: "${price}"
          payTo: "0x90F79bf6EB2c4f870365E785982E1f101E93b906"
          description: an API key with 100 credits
          networks:
            - network: ${o.network}
              asset: ${o.asset}
              payTo: "${o.payTo}"
              facilitator: { rpcUrl: "${o.rpcUrl}", signerKeyEnv: ${o.keyEnv}, receiptTimeoutMs: 1000, pollingIntervalMs: 50 }
  - name: rekey
    methods: [POST]
    path: /keys/rekey
    handler: { name: key-buy, config: { action: rekey, origin: "${ORIGIN}", chains: ${JSON.stringify(o.chains)}, challengeTtlSeconds: 300 } }
  - name: rekey-fast
    methods: [POST]
    path: /keys/rekey-fast
    handler: { name: key-buy, config: { action: rekey, origin: "${ORIGIN}", chains: ${JSON.stringify(o.chains)}, challengeTtlSeconds: 1 } }
  - name: metered
    path: /api/:apiKey/call
    upstream: echo
    plugins:
      - { name: key-in-path-auth, config: { param: apiKey, scope: rpc } }
      - { name: credit-meter, config: { apiType: PRIVNET_RPC, cost: 1 } }
`
}

/** A fetch that writes down every request and answer with their headers (the agent's session). */
export function recorder(lines: string[]): typeof fetch {
  return async (input, init) => {
    const request = new Request(input, init)
    const body = request.body ? await request.clone().text() : ''
    lines.push(`> ${request.method} ${new URL(request.url).pathname}`)
    request.headers.forEach((value, name) => lines.push(`> ${name}: ${name === 'x-buy-intent' ? '<the agent’s secret>' : value}`))
    if (body) lines.push(`> ${body}`)
    const res = await fetch(request)
    const text = await res.clone().text()
    lines.push(`< ${res.status}`)
    res.headers.forEach((value, name) => { if (name !== 'date' && name !== 'keep-alive' && name !== 'connection') lines.push(`< ${name}: ${value}`) })
    lines.push(`< ${text}`, '')
    return res
  }
}

