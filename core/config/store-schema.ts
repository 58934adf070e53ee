/**
 * `store` of gateway.yaml: the embedded or the shared engine and their settings (a part of coreSchema in schema.ts).
 */
import type { JsonSchema } from '../proxy/plugin.ts'

export const storeSchema: JsonSchema = {
  type: 'object',
  additionalProperties: false,
  default: {},
  description: 'Where state lives: the embedded SQLite engine (one instance), or the shared engine (PostgreSQL + Redis, any number of instances).',
  properties: {
    engine: {
      enum: ['sqlite', 'shared'],
      default: 'sqlite',
      description: 'sqlite: embedded SQLite (WAL) under dataDir, one gateway process. shared: PostgreSQL (credits, usage, documents) and Redis (rate-limit buckets), shared by every instance.',
    },
    dataDir: { type: 'string', default: './data', description: 'sqlite engine: directory of the database, relative to gateway.yaml.' },
    postgres: {
      type: 'string',
      pattern: '^postgres(ql)?://',
      description: 'shared engine: PostgreSQL URL, e.g. ${DATABASE_URL} (postgres://user@host:5432/db). The source of truth for credits, usage and documents.',
    },
    redis: {
      type: 'string',
      pattern: '^rediss?://',
      description: 'shared engine: Redis URL, e.g. ${REDIS_URL} (redis://host:6379, a database number may follow: /3). Holds rate-limit buckets only.',
    },
    schema: {
      type: 'string',
      pattern: '^[A-Za-z_][A-Za-z0-9_]{0,62}$',
      default: 'public',
      description: 'shared engine: PostgreSQL schema of the tables; created and migrated at start and by `tollgate migrate`.',
    },
    keyPrefix: {
      type: 'string',
      pattern: '^[A-Za-z0-9_.:{}-]{0,64}$',
      default: 'tollgate:',
      description: 'shared engine: prefix of every Redis key, so several gateways (or tests) can share one Redis.',
    },
    poolSize: { type: 'integer', minimum: 1, maximum: 100, default: 10, description: 'shared engine: most PostgreSQL connections per instance.' },
    instanceTimeoutMs: {
      type: 'integer',
      minimum: 200,
      default: 10000,
      description: 'shared engine: an instance that has not reached PostgreSQL for this long is taken for dead, and its pending credit reservations are released by the others.',
    },
    leaseCredits: {
      type: 'integer',
      minimum: 0,
      maximum: 1000000,
      default: 100,
      description:
        'shared engine: most credits an instance takes from a project\'s balance at a time (a lease), so that it admits requests without a PostgreSQL round trip; each charge is still written to PostgreSQL before its answer. A lease takes at most an eighth of what is left, and a request is refused only once no other instance holds unused leased credits, so refusals stay exact. 0 = one PostgreSQL reservation per request.',
    },
    creditCommit: {
      enum: ['durable', 'async'],
      default: 'durable',
      description:
        'shared engine: when a charge is answered. durable: after PostgreSQL has flushed it to disk (its WAL, under the default synchronous_commit = on), so it survives a crash of the gateway, of PostgreSQL and of the machine. async: once PostgreSQL has committed it in memory (synchronous_commit = off), on disk within 3 × wal_writer_delay (0.6 s by default): a crash of the gateway still loses nothing, a crash of PostgreSQL or its machine can lose the charges of that last fraction of a second (those requests stay served and uncharged); faster and lighter on the gateway. Grants and documents always wait for the disk.',
    },
    chargeEarly: {
      type: 'boolean',
      default: false,
      description:
        "shared engine: send a request's charge to PostgreSQL as soon as its credits are reserved from the instance's lease, so that the write and its disk flush run while the upstream serves the request; the answer still leaves only once the charge is durable. A request that ends uncharged (a refunded failure, a client gone) then costs one more write, and a request in flight when its gateway is killed stays charged. false: the charge is sent once the answer is known, and such a request is released.",
    },
    rateLeaseTokens: {
      type: 'integer',
      minimum: 0,
      maximum: 1000000,
      default: 100,
      description:
        'shared engine: most rate-limit tokens an instance takes from a Redis bucket ahead of its decisions (at most an eighth of what is left, spent within 250 ms or dropped), so that most decisions need no Redis call. No bucket admits more than it holds; a window of w seconds admits at most capacity + rate × (w + 0.25 s). 0 = one Redis decision per request.',
    },
  },
  if: { properties: { engine: { const: 'shared' } }, required: ['engine'] },
  then: { required: ['postgres', 'redis'] },
}
