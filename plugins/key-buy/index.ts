/**
 * `key-buy`: an agent buys an API key over x402, with no person in the loop. A route handler:
 *
 * - `action: buy`, behind `x402-paywall` (with `intentHeader`): a settled payment creates the
 *   paying wallet's project (plan, scopes and credit terms from this config) and returns an API key,
 *   shown once, with the credits bought; a later payment from the same wallet tops up that project
 *   (buy.ts).
 * - `action: rekey`: the wallet signs a sign-in-with-x challenge and gets a new key; the project's
 *   other keys are disabled (rekey.ts, siwx.ts).
 *
 * Projects and keys are written through the settings store, as the admin API writes them
 * (wallet-project.ts).
 *
 * ```yaml
 * - name: buy-key
 *   methods: [POST]
 *   path: /keys/buy
 *   errorFormat: x402
 *   handler: { name: key-buy, config: { unitsPerCredit: "100", plan: x402, scopes: [rpc] } }
 *   plugins:
 *     - { name: x402-paywall, config: { intentHeader: x-buy-intent, price: "10000", payTo: "0x…", networks: [ … ] } }
 * - name: rekey
 *   methods: [POST]
 *   path: /keys/rekey
 *   handler: { name: key-buy, config: { action: rekey, origin: "https://api.example.com", chains: ["eip155:84532"] } }
 * ```
 */
import { SCOPES } from '../../core/proxy/plugin-api.ts'
import type { PluginDefinition } from '../../core/proxy/plugin-api.ts'
import type { BillingPeriod } from '../../core/proxy/plugin-api.ts'
import { buyHandler } from './buy.ts'
import { WalletProjects } from './wallet-project.ts'

export interface KeyBuyConfig {
  action: 'buy' | 'rekey'
  unitsPerCredit?: string
  reason: string
  plan: string
  scopes: string[]
  allocation: number
  period: BillingPeriod
  projectPrefix: string
  origin?: string
  chains: string[]
  challengeTtlSeconds: number
  statement: string
}

const keyBuy: PluginDefinition<KeyBuyConfig> = {
  name: 'key-buy',
  version: '1.0.0',
  priority: 0,
  configSchema: {
    type: 'object',
    additionalProperties: false,
    properties: {
      action: {
        enum: ['buy', 'rekey'],
        default: 'buy',
        description: 'buy: behind x402-paywall (with intentHeader), a settled payment buys the paying wallet its project and credits, and a key on its first purchase. rekey: the wallet signs a sign-in-with-x challenge and gets a new key; its other keys are disabled.',
      },
      unitsPerCredit: {
        type: 'string',
        pattern: '^[1-9][0-9]{0,77}$',
        description: 'buy (required): atomic token units that buy one credit, e.g. "100": a payment of 10000 units buys 100 credits. Rounded down.',
      },
      reason: { type: 'string', pattern: '^[\\x21-\\x7e][\\x20-\\x7e]{0,63}$', default: 'x402-buy', description: "buy: the grant's reason in the project's credit ledger." },
      plan: { type: 'string', pattern: '^[a-zA-Z0-9_.-]{1,64}$', default: 'x402', description: 'buy: the plan of a project created for a wallet.' },
      scopes: { type: 'array', items: { enum: [...SCOPES] }, uniqueItems: true, default: [], description: 'buy: the scopes of a project created for a wallet (which routes its key may call).' },
      allocation: { type: 'integer', minimum: 0, default: 0, description: 'buy: credits a created project gets each period besides what it buys (0: only what it buys).' },
      period: { enum: ['hour', 'day', 'month'], default: 'month', description: "buy: the billing period of a created project; bought credits count in the period they were bought in." },
      projectPrefix: {
        type: 'string',
        pattern: '^[a-zA-Z0-9_.-]{1,16}$',
        default: 'wallet-',
        description: "The id of a wallet's project is this prefix and the address (EVM lower-cased): one project per wallet. buy and rekey routes must use the same prefix.",
      },
      origin: {
        type: 'string',
        pattern: '^https?://[^/?#]+$',
        description: "rekey (required): the gateway's public scheme and host, e.g. https://api.example.com. A challenge's domain and uri are bound to it, never to the Host header.",
      },
      chains: {
        type: 'array',
        minItems: 1,
        items: { type: 'string', pattern: '^(eip155:[1-9][0-9]{0,17}|solana:[1-9A-HJ-NP-Za-km-z]{1,44})$' },
        default: ['eip155:8453'],
        description: 'rekey: CAIP-2 chains a sign-in is accepted on (eip155:<id>: EIP-4361 + EIP-191; solana:<genesis>: ed25519). Offered as supportedChains.',
      },
      challengeTtlSeconds: { type: 'integer', minimum: 1, maximum: 3600, default: 300, description: 'rekey: how long a challenge (its nonce) can be signed and used, once.' },
      statement: {
        type: 'string',
        pattern: '^[\\x20-\\x7e]{1,200}$',
        default: "Sign in to replace the API key of this wallet's project",
        description: 'rekey: the statement shown to the signer in the challenge.',
      },
    },
  },
  async create(config, init) {
    const wallets = new WalletProjects(init.store.settings, init.projects, config)
    const docs = init.store.documents('key-buy')
    if (config.action === 'rekey') {
      if (!config.origin) throw new Error(`route ${init.routeName}: key-buy with action rekey needs origin (the public https://host)`)
      // Sign-in checks need viem and @solana/kit: loaded only for a rekey route, never at start
      // (every plugin folder is imported at start; bench/RESULTS.md, session 9, GC cost of modules).
      const { rekeyHandler } = await import('./rekey.ts')
      return { handle: rekeyHandler(docs, wallets, { origin: config.origin, chains: config.chains, challengeTtlSeconds: config.challengeTtlSeconds, statement: config.statement }) }
    }
    if (!config.unitsPerCredit) throw new Error(`route ${init.routeName}: key-buy with action buy needs unitsPerCredit`)
    // A purchase has no key to bind its payment to: without the paywall's intent header another
    // caller could complete it (test/security/x402-buy-key.test.ts). Refused at load, not per request.
    const paywall = init.route.plugins.find((entry) => entry.name === 'x402-paywall')
    if (!paywall) throw new Error(`route ${init.routeName}: key-buy with action buy must sit behind x402-paywall`)
    if (!paywall.config.intentHeader) throw new Error(`route ${init.routeName}: key-buy with action buy needs x402-paywall's intentHeader (e.g. x-buy-intent)`)
    return { handle: buyHandler(init.store, docs, wallets, { unitsPerCredit: BigInt(config.unitsPerCredit), reason: config.reason }, init.routeName) }
  },
}

export default keyBuy
