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
  AnswerRow: obj({
    bucket: iso,
    status: { type: 'integer' },
    code: { type: 'string', description: "the refusal reason or the error's stable code ('' for a plain status)" },
    refusal: { type: 'boolean', description: 'a 401, 402, 403 or 429' },
    count: { type: 'integer' },
  }),
  KeyRow: obj({
    label: { type: 'string' },
    requests: { type: 'integer' },
    refusals: { type: 'integer', description: '401, 402, 403 and 429 answers' },
    lastUsed: { type: ['string', 'null'], format: 'date-time' },
  }),
  Traffic: obj({
    project: { type: 'string' },
    by: { enum: ['answer', 'key'] },
    granularity: { enum: ['hour', 'day'] },
    from: iso,
    to: iso,
    rows: { type: 'array', items: { oneOf: [ref('AnswerRow'), ref('KeyRow')] }, description: 'AnswerRow with by=answer, KeyRow with by=key' },
    totals: { type: 'object', description: 'by=answer: {answers, refusals}; by=key: {requests, refusals}' },
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
      summary: 'Usage and balance of a project (credit-meter plugin); by=answer and by=key: every answer by status and refusal code, and per key (the core, with or without a meter); csv and ndjson export the rows alone',
      description:
        'by=apiType|route: the metered usage rows (credit-meter). by=answer: answers per bucket by status and refusal code ' +
        '(403 wrong_plan, 402 credits_exhausted, 429 rate_limited...), refusals of known keys included; by=key: each key\'s requests, ' +
        'refusals and last use (not bucketed). Both are the dashboard\'s traffic tally, which keeps the last 48 hours by hour.',
      parameters: [
        idParam,
        { name: 'from', in: 'query', schema: { type: 'string' }, description: 'ISO 8601 date or date-time; default: to minus 30 days' },
        { name: 'to', in: 'query', schema: { type: 'string' }, description: 'ISO 8601 date or date-time; default: now' },
        { name: 'granularity', in: 'query', schema: { enum: ['hour', 'day'], default: 'day' } },
        { name: 'by', in: 'query', schema: { enum: ['apiType', 'route', 'answer', 'key'], default: 'apiType' }, description: 'route: rows per API type, route and status class, with latency; answer: answers by status and refusal code; key: per key' },
        { name: 'format', in: 'query', schema: { enum: ['json', 'csv', 'ndjson'], default: 'json' } },
      ],
      responses: {
        '200': {
          description: 'OK',
          content: {
            'application/json': { schema: { oneOf: [ref('Usage'), ref('Traffic')] } },
            'text/csv': {
              schema: { type: 'string' },
              description: 'A header line, then one line per row (RFC 4180, CRLF)',
              'x-header-lines': {
                apiType: 'bucket,apiType,requests,credits,errors',
                route: 'bucket,apiType,route,statusClass,requests,credits,errors,latencyMsSum,latencyMsMax',
                answer: 'bucket,status,code,refusal,count',
                key: 'label,requests,refusals,lastUsed',
              },
            },
            'application/x-ndjson': { schema: { oneOf: [ref('UsageRow'), ref('UsageDetailRow'), ref('AnswerRow'), ref('KeyRow')] }, description: 'One row per line (this schema is the schema of a line)' },
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
