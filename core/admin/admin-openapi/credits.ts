/**
 * The admin OpenAPI document: usage (the credit-meter plugin) and credit balances, top-ups and the
 * ledger (core/admin/credits-admin.ts).
 */
import { body, errorAnswer, idParam, iso, json, obj, projectErrors, ref, type Schema } from './common.ts'

/** Component schemas of this area, in document order. */
export const creditSchemas: Record<string, Schema> = {
  UsageRow: obj({ bucket: iso, apiType: { type: 'string' }, requests: { type: 'integer' }, credits: { type: 'number' }, errors: { type: 'integer' } }),
  UsageDetailRow: obj({
    bucket: iso,
    apiType: { type: 'string' },
    route: { type: 'string' },
    statusClass: { enum: ['2xx', '3xx', '4xx', '5xx', 'other'] },
    requests: { type: 'integer' },
    credits: { type: 'number' },
    errors: { type: 'integer' },
    latencyMsSum: { type: 'number' },
    latencyMsMax: { type: 'number' },
  }),
  Usage: obj({
    project: { type: 'string' },
    granularity: { enum: ['hour', 'day'] },
    by: { enum: ['apiType', 'route'] },
    from: iso,
    to: iso,
    rows: { type: 'array', items: { oneOf: [ref('UsageRow'), ref('UsageDetailRow')] }, description: 'UsageRow with by=apiType, UsageDetailRow with by=route' },
    totals: obj({ requests: { type: 'integer' }, credits: { type: 'number' }, errors: { type: 'integer' } }),
    balance: obj({
      period: { type: 'string' },
      periodLength: { enum: ['hour', 'day', 'month'] },
      refill: { type: ['object', 'null'] },
      allocation: { type: 'integer' },
      granted: { type: 'number' },
      used: { type: 'number' },
      remaining: { type: 'number' },
    }),
  }),
  Balance: obj({ allocation: { type: 'integer' }, granted: { type: 'number' }, used: { type: 'number' }, remaining: { type: 'number' } }),
  Credits: obj({
    project: { type: 'string' },
    period: { type: 'string' },
    periodStart: iso,
    nextRefill: iso,
    schedule: obj({ period: { enum: ['hour', 'day', 'month'] }, refill: { type: ['object', 'null'] } }),
    balance: ref('Balance'),
  }),
  TopUp: obj({
    created: { type: 'boolean', description: 'false: this idempotencyKey granted before; nothing was added' },
    grant: obj({ id: { type: 'string' }, amount: { type: 'integer' }, reason: { type: 'string' }, actor: { type: 'string' } }),
    period: { type: 'string' },
    balance: ref('Balance'),
  }),
  LedgerEntry: {
    oneOf: [
      obj({ kind: { const: 'allocation' }, amount: { type: 'number' } }),
      obj({ kind: { const: 'grant' }, id: { type: 'string' }, reason: { type: 'string' }, actor: { type: 'string' }, at: iso, amount: { type: 'number' } }),
      obj(
        {
          kind: { const: 'charge' },
          apiType: { type: 'string' },
          hour: { type: 'string' },
          amount: { type: 'number' },
          reserved: { type: 'number', description: 'what those requests had reserved (negative): the estimate beside the actual; present when part went back before the commit, absent with credit leases' },
        },
        ['kind', 'apiType', 'hour', 'amount'],
      ),
      obj({ kind: { const: 'pending' }, amount: { type: 'number' } }),
      obj({ kind: { const: 'earlier_charges' }, amount: { type: 'number' } }),
      obj({
        kind: { const: 'carry', description: 'unspent grants a schedule change moved: positive in `to`, negative in `from`' },
        id: { type: 'string' }, from: { type: 'string' }, to: { type: 'string' }, actor: { type: 'string' }, at: iso, amount: { type: 'number' },
      }),
    ],
  },
  Ledger: obj({ project: { type: 'string' }, period: { type: 'string' }, balance: ref('Balance'), entries: { type: 'array', items: ref('LedgerEntry') } }),
}

/** Paths of this area, in document order. */
export const creditPaths: Record<string, Record<string, unknown>> = {
  '/admin/projects/{id}/usage': {
    get: {
      summary: 'Usage and balance of a project (credit-meter plugin); csv and ndjson export the rows alone',
      parameters: [
        idParam,
        { name: 'from', in: 'query', schema: { type: 'string' }, description: 'ISO 8601 date or date-time; default: to minus 30 days' },
        { name: 'to', in: 'query', schema: { type: 'string' }, description: 'ISO 8601 date or date-time; default: now' },
        { name: 'granularity', in: 'query', schema: { enum: ['hour', 'day'], default: 'day' } },
        { name: 'by', in: 'query', schema: { enum: ['apiType', 'route'], default: 'apiType' }, description: 'route: rows per API type, route and status class, with latency' },
        { name: 'format', in: 'query', schema: { enum: ['json', 'csv', 'ndjson'], default: 'json' } },
      ],
      responses: {
        '200': {
          description: 'OK',
          content: {
            'application/json': { schema: ref('Usage') },
            'text/csv': {
              schema: { type: 'string' },
              description: 'A header line, then one line per row (RFC 4180, CRLF)',
              'x-header-lines': { apiType: 'bucket,apiType,requests,credits,errors', route: 'bucket,apiType,route,statusClass,requests,credits,errors,latencyMsSum,latencyMsMax' },
            },
            'application/x-ndjson': { schema: { oneOf: [ref('UsageRow'), ref('UsageDetailRow')] }, description: 'One row per line (this schema is the schema of a line)' },
          },
        },
        '400': errorAnswer('invalid_query: from, to, granularity, by or format'),
        ...projectErrors,
      },
    },
  },
  '/admin/projects/{id}/credits': {
    get: { summary: 'Balance of the current period (granted included), its schedule and next refill', parameters: [idParam], responses: { '200': json(ref('Credits')), ...projectErrors } },
  },
  '/admin/projects/{id}/credits/top-up': {
    post: {
      summary: 'Grant credits in the current period (operators); the same idempotencyKey grants once',
      parameters: [idParam],
      requestBody: body(
        obj(
          {
            amount: { type: 'integer', minimum: 1, maximum: 1_000_000_000_000 },
            reason: { type: 'string', pattern: '^[\\x21-\\x7e][\\x20-\\x7e]{0,63}$', description: "1 to 64 printable ASCII characters (default 'top_up')" },
            idempotencyKey: { type: 'string', pattern: '^[A-Za-z0-9_.:-]{1,128}$' },
          },
          ['amount'],
        ),
      ),
      responses: {
        '201': json(ref('TopUp'), 'Granted'),
        '200': json(ref('TopUp'), 'Already granted with this idempotencyKey (created false)'),
        '400': errorAnswer('invalid_body'),
        ...projectErrors,
      },
    },
  },
  '/admin/projects/{id}/credits/ledger': {
    get: {
      summary: "The entries that explain a period's balance",
      parameters: [idParam, { name: 'period', in: 'query', schema: { type: 'string', pattern: '^\\d{4}-\\d{2}(-\\d{2}(T\\d{2}|/P1M)?)?$' }, description: 'default: the current period' }],
      responses: { '200': json(ref('Ledger')), '400': errorAnswer('invalid_query'), ...projectErrors },
    },
  },
}
