/**
 * `projects[]` of gateway.yaml (and of its projectsFile): a project's plan, scopes, credits,
 * features, hashed credentials and low-balance alerts (a part of coreSchema in schema.ts; load.ts
 * also validates each project of a projectsFile against it).
 */
import type { JsonSchema } from '../proxy/plugin.ts'

/** One API key of a project: its hash, never the key. */
const apiKey: JsonSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['hash'],
  properties: {
    label: { type: 'string', default: 'default', description: 'Human label of the key (shown in logs instead of the key).' },
    hash: { type: 'string', pattern: '^sha256:[0-9a-f]{64}$', description: 'sha256 digest of the key: `tollgate hash-key KEY`.' },
    disabled: { type: 'boolean', default: false, description: 'A disabled key is refused with 401.' },
    expiresAt: { type: 'string', format: 'date-time', description: 'ISO 8601 time after which the key is refused.' },
  },
}

const feature = (description: string): JsonSchema => ({ type: 'boolean', default: false, description })

/** `projects[].alerts`: low-balance webhooks (core/alerts/low-balance.ts). */
const lowBalanceAlerts: JsonSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['url', 'secret', 'thresholds'],
  description:
    'Low-balance alerts: when the credits left in the current period fall to a threshold, a webhook POST signed with HMAC-SHA256, once per threshold and period, retried with backoff.',
  properties: {
    url: { type: 'string', pattern: '^https?://', description: 'Webhook receiver (http or https URL) that gets the JSON alert.' },
    secret: {
      type: 'string',
      minLength: 16,
      description: 'HMAC-SHA256 key of the x-tollgate-signature header (at least 16 characters); keep it out of the file with ${ALERT_SECRET}.',
    },
    thresholds: {
      type: 'array',
      minItems: 1,
      maxItems: 10,
      description: 'Each fires once per billing period when the credits left are at or below it.',
      items: {
        type: 'object',
        additionalProperties: false,
        minProperties: 1,
        maxProperties: 1,
        description: 'Exactly one of percent or remaining.',
        properties: {
          percent: { type: 'number', exclusiveMinimum: 0, maximum: 100, description: 'Credits left as a percentage of the allocation, e.g. 20.' },
          remaining: { type: 'integer', minimum: 0, description: 'Credits left, absolute, e.g. 500.' },
        },
      },
    },
    maxAttempts: { type: 'integer', minimum: 1, maximum: 20, default: 6, description: 'Deliveries tried per alert before it is recorded as failed.' },
    retryBaseMs: { type: 'integer', minimum: 10, default: 1000, description: 'Wait after the first failed attempt; doubled after each further failure.' },
    retryMaxMs: { type: 'integer', minimum: 10, default: 60000, description: 'Longest wait between two attempts.' },
    timeoutMs: { type: 'integer', minimum: 100, default: 5000, description: 'An attempt with no answer within this time has failed.' },
  },
}

/** One project. */
export const projectSchema: JsonSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['id', 'keys'],
  properties: {
    id: { type: 'string', pattern: '^[a-zA-Z0-9_.-]{1,64}$', description: 'Stable project id; used as a metrics label.' },
    name: { type: 'string', description: 'Display name.' },
    plan: { type: 'string', default: 'standard', description: 'Plan; ZK-PaaS and node RPC need `enterprise`.' },
    scopes: {
      type: 'array',
      uniqueItems: true,
      items: { enum: ['zkpaas', 'rpc', 'x402', 'mirror', 'events'] },
      default: [],
      description: 'Services this project may call.',
    },
    credits: {
      type: 'object',
      additionalProperties: false,
      default: {},
      description: 'Credit allocation per period.',
      properties: {
        allocation: { type: 'integer', minimum: 0, default: 0, description: 'Credits per period.' },
        period: { enum: ['hour', 'day', 'month'], default: 'month', description: 'Billing period (UTC). Ignored when refill is set.' },
        refill: {
          type: 'object',
          additionalProperties: false,
          required: ['interval'],
          description: 'Refill schedule: the allocation is fresh at every refill (UTC). Overrides period.',
          properties: {
            interval: { enum: ['day', 'month'], description: 'day: every day at 00:00 UTC; month: every month on `day`.' },
            day: {
              type: 'integer',
              minimum: 1,
              maximum: 31,
              description: "Monthly (default 1): the day of the month the allocation refills on; a day past the month's end means its last day (31 → Feb 28/29).",
            },
          },
        },
      },
    },
    features: {
      type: 'object',
      additionalProperties: false,
      default: {},
      description: 'Per-project ZK features.',
      properties: {
        proveBatch: feature('ZK Prove Batch: use of /prove-batch.'),
        sponsoredWallet: feature('Sponsored Wallet: the `sponsored` request header is honoured.'),
        relayToConfidentialSpace: feature('zk_relay_to_space: relay proof jobs to the confidential space; operator only.'),
        tee: feature('TEE proving: `tee_enabled` requests go to the TEE pool.'),
        workstation: feature('Cloud workstation: the project may provision one (admin API, /workstations/:id/); operator only.'),
      },
    },
    secretHash: { type: 'string', pattern: '^sha256:[0-9a-f]{64}$', description: 'sha256 digest of the project secret.' },
    keys: { type: 'array', items: apiKey, description: 'API keys of the project (hashed).' },
    settings: { type: 'object', default: {}, description: 'Free-form per-project settings read by plugins.' },
    alerts: lowBalanceAlerts,
  },
}
