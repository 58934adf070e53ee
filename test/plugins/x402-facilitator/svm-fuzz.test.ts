/**
 * Generative fuzzing (fast-check) of the Solana facilitator's verify and settle bodies, at the
 * level svm-verify.test.ts drives it (the facilitator over the local SVM's JSON-RPC front). Every
 * case starts from a valid official `@x402/svm` client payment (x402 v1 or v2) and applies one
 * mutation: bytes of the wire transaction (flipped, cut, extended, re-signed after a change),
 * lookup tables appended (missing, empty, out of range, holding the fee payer), text that is not
 * base64, huge strings (≤ 200 KB), wrong JSON types / missing / extra fields anywhere in the
 * body, odd amounts, addresses, networks, schemes, fee payers and timeouts.
 *
 * A last property builds random instruction layouts (signed by the payer) and checks that ours
 * accepts only what the official facilitator also accepts (ours is stricter, never looser).
 *
 * The rule for a client's bad input: a 400 naming the field (`details.field`, repeated in the
 * message), or a 200 `isValid: false` / `success: false` with a known `invalid_*` code; never a
 * throw (the route would answer 5xx), never a hang; a mutation that surely breaks the payment is
 * refused; and settle sends a transaction only for what verify accepts (SVM balances and the
 * front's executed list checked after every case).
 *
 * `SVM_FUZZ_SEED` replays a run (the seed is printed); `SVM_FUZZ_RUNS` scales it.
 */
import t from 'tap'
import fc from 'fast-check'
import { isDeepStrictEqual } from 'node:util'
import { getBase58Encoder, type Address } from '@solana/kit'
import { devAccount } from '../../../examples/svm/index.ts'
import { svmReasons } from '../../../plugins/x402-facilitator/svm/errors.ts'
import { signerFromSecretKey } from '../../../plugins/x402-facilitator/svm/keys.ts'
import { bodyV2, craft, ix, officialBody, officialVerdict, price, standard, startSvmFixture } from './svm-helpers.ts'

const SEED = Number(process.env.SVM_FUZZ_SEED ?? Date.now() % 2 ** 31)
const RUNS = Number(process.env.SVM_FUZZ_RUNS ?? 300)
const DEADLINE_MS = 10_000

const f = await startSvmFixture()
t.teardown(() => f.close())
t.comment(`seed ${SEED} (SVM_FUZZ_SEED=${SEED} repeats this run), ${RUNS} cases per property`)

const payerSigner = signerFromSecretKey(f.local.accounts.payer.secretKey)
/** Lookup tables a `lookup` mutation may name: two entries each (a third index is out of range). */
const tables = {
  table: devAccount('fuzz lookup table').address as string,
  feeTable: devAccount('fuzz lookup table with the fee payer').address as string,
  missing: devAccount('fuzz missing lookup table').address as string,
  mint: f.local.mint as string,
}
f.local.setLookupTable(tables.table as Address, [f.local.accounts.poor.address, devAccount('fuzz unrelated').address])
f.local.setLookupTable(tables.feeTable as Address, [f.local.accounts.poor.address, f.feePayer as Address])
const other = f.local.accounts.poor.address as string
const bs58 = getBase58Encoder()
const known = new Set<string>(Object.values(svmReasons).flat())

// ---- mutations ------------------------------------------------------------------------------------

/** A JSON path in a body: keys from the root. */
type Path = string[]

/**
 * One mutation, as plain data (printed when a case fails). `kind` picks what it does; `path`
 * (JSON mutations) or `pos` / `mask` / `len` (byte mutations) say where.
 */
type Mutation =
  | { kind: 'flip'; pos: number; mask: number }
  | { kind: 'resign'; pos: number; mask: number }
  | { kind: 'lookup'; table: 'table' | 'feeTable' | 'missing' | 'mint'; writable: number[]; readonly: number[] }
  | { kind: 'memo'; value: unknown; paired: boolean }
  | { kind: 'truncate'; len: number }
  | { kind: 'extend'; bytes: number[] }
  | { kind: 'text'; value: string }
  | { kind: 'huge'; size: number; char: string; where: 'transaction' | 'field' }
  | { kind: 'base64'; edit: 'unpad' | 'newline' | 'space' | 'url' | 'lower' }
  | { kind: 'set'; path: number; value: unknown }
  | { kind: 'delete'; path: number }
  | { kind: 'extraField'; path: number; key: string; value: unknown }
  | { kind: 'amount'; value: unknown; paired: boolean }
  | { kind: 'address'; field: 'asset' | 'payTo' | 'feePayer'; value: unknown; paired: boolean }
  | { kind: 'network'; value: string; side: 'paid' | 'required' | 'both' }
  | { kind: 'scheme'; value: string; side: 'paid' | 'required' | 'both' }
  | { kind: 'timeout'; value: unknown }
  | { kind: 'body'; value: unknown }

interface Case { version: 1 | 2; mutation: Mutation }

const weird = fc.oneof(
  fc.constantFrom<unknown>(null, true, false, 0, -1, 1.5, 1e21, 2, '', '0', '2', '10000', 'exact', [], {}, [null], { a: 1 }, 'null', '[]', '{}'),
  fc.integer(), fc.double({ noNaN: true, noDefaultInfinity: true }), fc.string({ maxLength: 50 }),
  fc.array(fc.integer(), { maxLength: 4 }), fc.dictionary(fc.string({ maxLength: 6 }), fc.integer(), { maxKeys: 3 }),
)

const amounts = fc.oneof(
  fc.constantFrom<unknown>('-1', '-10000', '1.5', '10000.0', '1e4', '1E4', '10000e0', '010000', '00', '0x2710', '+10000', ' 10000', '10000 ', '10_000',
    '18446744073709551615', '18446744073709551616', '99999999999999999999', '340282366920938463463374607431768211456', '9'.repeat(400), '0', '',
    '１００００', '10000\n', 10000, 1e4, -1, 1.5, null, ['10000'], { value: '10000' }),
  fc.bigInt({ min: -(2n ** 70n), max: 2n ** 70n }).map(String),
)

/** 32 bytes that are not an ed25519 point are found by trial; these few are fixed strings. */
const addresses = fc.oneof(
  fc.constantFrom<unknown>(
    '11111111111111111111111111111111', // 32 zero bytes (the system program)
    '1111111111111111111111111111111', // 31 bytes
    '111111111111111111111111111111111', // 33 bytes
    'zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz', // 44 chars, more than 32 bytes
    '2222222222222222222222222222222222222222222', // 43 characters, 31 bytes
    'IIIIlllll0000OOOOOOOOIIIIlllll0000OOOOOOO', // not base58
    'So11111111111111111111111111111111111111112', // wrapped SOL mint
    'TokenkegQfeZyiNwAJbNbGKPFXCWuBvf9Ss623VQ5DA', // the token program
    '', ' ', 'x', null, 42, [], {},
  ),
  fc.uint8Array({ minLength: 32, maxLength: 32 }).map((b) => Buffer.from(b).toString('hex')), // hex, not base58
  fc.string({ unit: fc.constantFrom(...'123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz'.split('')), minLength: 28, maxLength: 48 }),
)

const networks = fc.constantFrom(
  'solana', 'solana-mainnet', 'solana-devnet', 'solana-testnet', 'solana-testnet ', 'Solana-Testnet', 'solana_testnet', 'testnet', 'mainnet-beta', 'devnet',
  'solana:5eykt4UsFv8P8NJdTREpY1vzqKqZKvdp', 'solana:EtWTRABZaYq6iMfeYKouRu166VU2xqa1', 'solana:4uhcVJyU9pJkvQyS88uRDiswHXSCkY3z',
  'solana:4uhcVJyU9pJkvQyS88uRDiswHXSCkY3zQawwpjk2NsNY', 'solana:4uhcVJyU9pJkvQyS88uRDiswHXSCkY3', 'SOLANA:4uhcVJyU9pJkvQyS88uRDiswHXSCkY3z',
  'solana:4uhcvjyu9pjkvqys88urdiswhxscky3z', 'solana:', 'solana:*', 'eip155:84532', 'base-sepolia', '', 'x'.repeat(129),
)
const testnetNames = new Set(['solana-testnet', 'solana:4uhcVJyU9pJkvQyS88uRDiswHXSCkY3z'])

const schemes = fc.constantFrom('exact', 'EXACT', 'Exact', ' exact', 'exact ', 'upto', 'exact-svm', '', 'x'.repeat(129))

const side = fc.constantFrom<'paid' | 'required' | 'both'>('paid', 'required', 'both')

const mutation: fc.Arbitrary<Mutation> = fc.oneof(
  { arbitrary: fc.record({ kind: fc.constant('flip' as const), pos: fc.nat({ max: 1231 }), mask: fc.integer({ min: 1, max: 255 }) }), weight: 4 },
  { arbitrary: fc.record({ kind: fc.constant('resign' as const), pos: fc.nat({ max: 1231 }), mask: fc.integer({ min: 1, max: 255 }) }), weight: 5 },
  { arbitrary: fc.record({ kind: fc.constant('lookup' as const), table: fc.constantFrom<'table' | 'feeTable' | 'missing' | 'mint'>('table', 'table', 'feeTable', 'missing', 'mint'), writable: fc.array(fc.nat({ max: 4 }), { maxLength: 3 }), readonly: fc.array(fc.nat({ max: 4 }), { maxLength: 3 }) }), weight: 2 },
  { arbitrary: fc.record({ kind: fc.constant('memo' as const), value: fc.oneof(weird, fc.string({ maxLength: 300 }), fc.constant('x'.repeat(257))), paired: fc.boolean() }), weight: 1 },
  { arbitrary: fc.record({ kind: fc.constant('truncate' as const), len: fc.nat({ max: 1300 }) }), weight: 2 },
  { arbitrary: fc.record({ kind: fc.constant('extend' as const), bytes: fc.array(fc.nat({ max: 255 }), { minLength: 1, maxLength: 1100 }) }), weight: 2 },
  { arbitrary: fc.record({ kind: fc.constant('text' as const), value: fc.oneof(fc.string({ maxLength: 80 }), fc.constantFrom('!!!', 'AAAA', 'AA==', '====', 'AAA', '', 'ÿþ', '\u0000\u0000\u0000\u0000')) }), weight: 2 },
  { arbitrary: fc.record({ kind: fc.constant('huge' as const), size: fc.integer({ min: 1_645, max: 200_000 }), char: fc.constantFrom('A', 'z', '+', '!', 'é', '9'), where: fc.constantFrom<'transaction' | 'field'>('transaction', 'field') }), weight: 1 },
  { arbitrary: fc.record({ kind: fc.constant('base64' as const), edit: fc.constantFrom<'unpad' | 'newline' | 'space' | 'url' | 'lower'>('unpad', 'newline', 'space', 'url', 'lower') }), weight: 1 },
  { arbitrary: fc.record({ kind: fc.constant('set' as const), path: fc.nat(), value: weird }), weight: 6 },
  { arbitrary: fc.record({ kind: fc.constant('delete' as const), path: fc.nat() }), weight: 3 },
  { arbitrary: fc.record({ kind: fc.constant('extraField' as const), path: fc.nat(), key: fc.constantFrom('x', 'extra', '__proto__', 'constructor', 'toString', 'signature', ''), value: weird }), weight: 2 },
  { arbitrary: fc.record({ kind: fc.constant('amount' as const), value: amounts, paired: fc.boolean() }), weight: 3 },
  { arbitrary: fc.record({ kind: fc.constant('address' as const), field: fc.constantFrom<'asset' | 'payTo' | 'feePayer'>('asset', 'payTo', 'feePayer'), value: fc.oneof(addresses, fc.constantFrom<unknown>('payer', 'other', 'mint2022')), paired: fc.boolean() }), weight: 3 },
  { arbitrary: fc.record({ kind: fc.constant('network' as const), value: networks, side }), weight: 2 },
  { arbitrary: fc.record({ kind: fc.constant('scheme' as const), value: schemes, side }), weight: 1 },
  { arbitrary: fc.record({ kind: fc.constant('timeout' as const), value: fc.oneof(fc.constantFrom<unknown>(0, -1, 1, 1.5, 59.999, 2 ** 31, 2 ** 53, 2 ** 64, 1e308, '60', null, [60], {}), fc.integer(), fc.double({ noNaN: true, noDefaultInfinity: true })) }), weight: 2 },
  { arbitrary: fc.record({ kind: fc.constant('body' as const), value: fc.oneof(weird, fc.constantFrom<unknown>({ x402Version: 0 }, { x402Version: 3 }, { x402Version: '2' }, { x402Version: 2 }, { x402Version: null, paymentPayload: null })) }), weight: 1 },
)

const cases: fc.Arbitrary<Case> = fc.record({ version: fc.constantFrom<1 | 2>(1, 2), mutation })

// ---- applying a mutation ----------------------------------------------------------------------

/** Every path of a body (objects only; the leaves and the objects themselves). */
function pathsOf(value: unknown, prefix: Path = []): Path[] {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return []
  const out: Path[] = []
  for (const key of Object.keys(value)) {
    out.push([...prefix, key])
    out.push(...pathsOf((value as Record<string, unknown>)[key], [...prefix, key]))
  }
  return out
}

const getAt = (body: any, path: Path) => path.reduce((v, k) => v?.[k], body)
/** Sets an own property (a `__proto__` key stays data, as JSON.parse makes it). */
function setAt(body: any, path: Path, value: unknown): void {
  const parent = getAt(body, path.slice(0, -1))
  Object.defineProperty(parent, path.at(-1)!, { value, enumerable: true, writable: true, configurable: true })
}
function deleteAt(body: any, path: Path): void {
  delete getAt(body, path.slice(0, -1))[path.at(-1)!]
}

/** The fields whose value decides the payment: any other value must be refused. */
function decisive(version: 1 | 2, path: Path): boolean {
  const p = path.join('.')
  const terms = ['scheme', 'network', 'asset', 'payTo', 'extra', 'extra.feePayer', version === 1 ? 'maxAmountRequired' : 'amount']
  const core = ['x402Version', 'paymentPayload', 'paymentPayload.x402Version', 'paymentPayload.payload', 'paymentPayload.payload.transaction', 'paymentRequirements',
    ...terms.map((term) => `paymentRequirements.${term}`)]
  if (version === 1) core.push('paymentPayload.scheme', 'paymentPayload.network')
  else core.push('paymentPayload.accepted', ...terms.map((term) => `paymentPayload.accepted.${term}`))
  return core.includes(p)
}

const txPath: Path = ['paymentPayload', 'payload', 'transaction']
const amountField = (version: 1 | 2) => (version === 1 ? 'maxAmountRequired' : 'amount')

interface Applied {
  /** What a client would send (JSON text parsed again). */
  body: unknown
  /** The payment is surely broken: it must be refused. */
  mustFail: boolean
  /** The field a 400 must name, when the mutation aimed at one. */
  field?: RegExp
  /** The body is malformed (not a verdict about a payment): the answer must be a 400. */
  malformed?: boolean
}

/** Requirement objects a term mutation writes to: v1 requirements (and payload for scheme/network), v2 accepted and/or requirements. */
function termTargets(version: 1 | 2, which: 'paid' | 'required' | 'both'): Path[] {
  const paid: Path = version === 1 ? ['paymentPayload'] : ['paymentPayload', 'accepted']
  const required: Path = ['paymentRequirements']
  return which === 'paid' ? [paid] : which === 'required' ? [required] : [paid, required]
}

function apply(base: any, c: Case): Applied {
  // Through JSON, as a client sends it: the helpers' v2 body shares one object between accepted
  // and paymentRequirements, which a structured clone would keep shared.
  const body = JSON.parse(JSON.stringify(base))
  const m = c.mutation
  const wire = Buffer.from(getAt(body, txPath) as string, 'base64')
  const setTx = (bytes: Uint8Array) => setAt(body, txPath, Buffer.from(bytes).toString('base64'))
  const done = (mustFail: boolean, field?: RegExp, malformed = false): Applied => ({ body: JSON.parse(JSON.stringify(body)), mustFail, field, malformed })
  switch (m.kind) {
    case 'flip': {
      const pos = m.pos % wire.length
      wire[pos]! ^= m.mask
      setTx(wire)
      // The fee payer's slot (bytes 1–64) is not signed by the payer: the facilitator overwrites it.
      return done(pos === 0 || pos > 64)
    }
    case 'resign': {
      // Change the message, then sign it again as the payer: checks past the signature see it.
      const messageStart = 1 + 64 * wire[0]!
      const pos = messageStart + (m.pos % (wire.length - messageStart))
      wire[pos]! ^= m.mask
      const signature = payerSigner.sign(wire.subarray(messageStart))
      wire.set(signature, 1 + 64)
      setTx(wire)
      return done(false)
    }
    case 'lookup': {
      // A v0 message ends with its lookup count (0 from the official client): append one table use.
      if (wire.at(-1) !== 0) throw new Error('expected a v0 transaction without lookups')
      const use = Buffer.concat([Buffer.from(bs58.encode(tables[m.table])), Buffer.from([m.writable.length, ...m.writable, m.readonly.length, ...m.readonly])])
      const changed = Buffer.concat([wire.subarray(0, -1), Buffer.from([1]), use])
      changed.set(payerSigner.sign(changed.subarray(1 + 64 * changed[0]!)), 65)
      setTx(changed)
      const indexes = [...m.writable, ...m.readonly]
      return done(m.table === 'missing' || m.table === 'mint' || indexes.length === 0 || indexes.some((i) => i >= 2))
    }
    case 'memo': {
      const targets = c.version === 1 ? [['paymentRequirements']] : m.paired ? termTargets(2, 'both') : termTargets(2, 'required')
      for (const target of targets) setAt(body, [...target, 'extra', 'memo'], m.value)
      // The official client's memo is a random nonce: any non-empty expected memo differs from it.
      const bad = typeof m.value !== 'string' || Buffer.byteLength(m.value) > 256
      return done(bad || m.value !== '', bad ? /memo/ : undefined, typeof m.value !== 'string' || m.value.length > 256)
    }
    case 'truncate':
      setTx(wire.subarray(0, m.len % wire.length))
      return done(true)
    case 'extend':
      setTx(Buffer.concat([wire, Buffer.from(m.bytes)]))
      return done(true)
    case 'text':
      setAt(body, txPath, m.value)
      return done(true)
    case 'huge': {
      const text = m.char.repeat(m.size)
      if (m.where === 'transaction') {
        setAt(body, txPath, text)
        return done(true, /transaction/, true)
      }
      const paths = pathsOf(body).filter((p) => decisive(c.version, p) && typeof getAt(body, p) === 'string')
      const path = paths[m.size % paths.length]!
      setAt(body, path, text)
      return done(true, new RegExp(path.at(-1)!), true)
    }
    case 'base64': {
      const text = getAt(body, txPath) as string
      const edited = m.edit === 'unpad' ? text.replace(/=+$/, '') : m.edit === 'newline' ? text.replace(/(.{76})/g, '$1\n')
        : m.edit === 'space' ? ` ${text} ` : m.edit === 'url' ? text.replaceAll('+', '-').replaceAll('/', '_') : text.toLowerCase()
      setAt(body, txPath, edited)
      // Unpadded base64 decodes to the same bytes; the others change or refuse the text.
      return done(m.edit === 'lower' || (m.edit === 'url' && edited !== text))
    }
    case 'set': {
      const paths = pathsOf(body)
      const path = paths[m.path % paths.length]!
      const before = getAt(body, path)
      setAt(body, path, m.value)
      return done(decisive(c.version, path) && !isDeepStrictEqual(before, m.value))
    }
    case 'delete': {
      const paths = pathsOf(body)
      const path = paths[m.path % paths.length]!
      deleteAt(body, path)
      // The top-level x402Version may be left out: the payload's is used.
      return done(decisive(c.version, path) && path.join('.') !== 'x402Version')
    }
    case 'extraField': {
      const objects = [[], ...pathsOf(body)].filter((p) => { const v = getAt(body, p); return typeof v === 'object' && v !== null && !Array.isArray(v) })
      const path = objects[m.path % objects.length]!
      if (m.key in (getAt(body, path) as object) && Object.hasOwn(getAt(body, path), m.key)) return done(false)
      setAt(body, [...path, m.key], m.value)
      // Only the payload object is closed.
      return done(path.join('.') === 'paymentPayload.payload', path.join('.') === 'paymentPayload.payload' ? /paymentPayload\.payload/ : undefined)
    }
    case 'amount': {
      const targets = c.version === 1 ? [['paymentRequirements']] : m.paired ? termTargets(2, 'both') : termTargets(2, 'required')
      for (const target of targets) setAt(body, [...target, amountField(c.version)], m.value)
      const u64 = typeof m.value === 'string' && /^(0|[1-9][0-9]*)$/.test(m.value) && BigInt(m.value) < 2n ** 64n
      return done(m.value !== price, new RegExp(amountField(c.version)), !u64)
    }
    case 'address': {
      const value = m.value === 'payer' ? f.payer.address : m.value === 'other' ? other : m.value === 'mint2022' ? f.local.mint2022 : m.value
      const targets = c.version === 1 ? [['paymentRequirements']] : m.paired ? termTargets(2, 'both') : termTargets(2, 'required')
      for (const target of targets) {
        if (m.field === 'feePayer') setAt(body, [...target, 'extra', 'feePayer'], value)
        else setAt(body, [...target, m.field], value)
      }
      const before = m.field === 'feePayer' ? base.paymentRequirements.extra.feePayer : base.paymentRequirements[m.field]
      const address = typeof value === 'string' && /^[1-9A-HJ-NP-Za-km-z]+$/.test(value) && bs58.encode(value).length === 32
      return done(value !== before, new RegExp(m.field), m.field !== 'feePayer' && !address)
    }
    case 'network': {
      for (const target of termTargets(c.version, m.side)) setAt(body, [...target, 'network'], m.value)
      // v1 payload and requirements may each use any of the network's names; v2 must repeat the same one.
      const valid = c.version === 1 || m.side === 'both' ? testnetNames.has(m.value) : m.value === base.paymentRequirements.network
      return done(!valid)
    }
    case 'scheme':
      for (const target of termTargets(c.version, m.side)) setAt(body, [...target, 'scheme'], m.value)
      return done(m.value !== 'exact')
    case 'timeout': {
      for (const target of termTargets(c.version, 'both')) setAt(body, [...target, 'maxTimeoutSeconds'], m.value)
      const bad = !(typeof m.value === 'number' && Number.isInteger(m.value) && m.value >= 1)
      return done(bad, bad ? /maxTimeoutSeconds/ : undefined, bad)
    }
    case 'body':
      return { body: JSON.parse(JSON.stringify(m.value)), mustFail: true, malformed: true }
  }
}

// ---- judging an answer ----------------------------------------------------------------------------

/** What is wrong with a verify / settle answer, or undefined. */
function problemWith(kind: 'verify' | 'settle', outcome: { status: number; body: any } | { thrown: string }, applied: Applied): string | undefined {
  if ('thrown' in outcome) return `threw (the route answers 5xx): ${outcome.thrown}`
  const { status, body } = outcome
  const ok = kind === 'verify' ? body.isValid : body.success
  const reason = kind === 'verify' ? body.invalidReason : body.errorReason
  const message = kind === 'verify' ? body.invalidMessage : body.errorMessage
  if (status !== 200 && status !== 400) return `status ${status}`
  if (applied.malformed && status !== 400) return `a malformed body answered ${status} ${reason}`
  if (status === 400) {
    if (ok !== false) return '400 without a refusal'
    if (reason !== 'invalid_payload' && reason !== 'invalid_x402_version') return `400 with reason ${reason}`
    const field = body.details?.field
    if (reason === 'invalid_payload' && (typeof field !== 'string' || field === '')) return '400 without details.field'
    // The message starts with the field's path (`paymentRequirements.amount must be …`; `body must be …`).
    if (typeof message !== 'string' || (field && !message.includes(field === '(body)' ? 'body' : field))) return `400 message does not name the field (${message})`
    if (applied.field && reason === 'invalid_payload' && !applied.field.test(field)) return `400 names ${field}, not ${applied.field}`
    return undefined
  }
  if (ok === true) return applied.mustFail ? 'a broken payment was accepted' : undefined
  if (ok !== false) return `no verdict: ${JSON.stringify(body).slice(0, 200)}`
  if (typeof reason !== 'string' || !known.has(reason)) return `unknown reason ${reason}`
  if (kind === 'settle' && (reason === 'settlement_pending' || reason === 'duplicate_settlement')) return `settle answered ${reason} for one sequential request`
  if (typeof message !== 'string' || message === '') return 'a refusal without a message'
  return undefined
}

async function bounded<T>(work: Promise<T>): Promise<{ status: number; body: any } | { thrown: string }> {
  let timer: NodeJS.Timeout | undefined
  const deadline = new Promise<never>((_, reject) => { timer = setTimeout(() => reject(new Error(`no answer within ${DEADLINE_MS} ms (hang)`)), DEADLINE_MS) })
  try {
    return await Promise.race([work as Promise<any>, deadline])
  } catch (error) {
    return { thrown: `${(error as Error).name}: ${(error as Error).message}` }
  } finally {
    clearTimeout(timer)
  }
}

/** Violations grouped by problem; each keeps its first case so it can be replayed by hand. */
class Findings {
  readonly #found = new Map<string, { count: number; example: Case }>()
  add(problem: string, c: Case): void {
    const key = `${c.mutation.kind}: ${problem.replace(/\d{3,}/g, 'N')}`
    const entry = this.#found.get(key)
    if (entry) entry.count++
    else this.#found.set(key, { count: 1, example: c })
  }
  report(t: { fail(m: string): void; pass(m: string): void }): void {
    for (const [problem, { count, example }] of this.#found) {
      t.fail(`${problem} (${count}×), e.g. ${JSON.stringify(example, (_, v) => (typeof v === 'string' && v.length > 120 ? `${v.slice(0, 40)}…(${v.length} chars)` : v))}`)
    }
    if (this.#found.size === 0) t.pass('no violation')
  }
}

const tally = (counts: Map<string, number>, key: string) => counts.set(key, (counts.get(key) ?? 0) + 1)

// ---- properties -----------------------------------------------------------------------------------

t.test('verify: every mutation of an official payment is answered by the rule', async (t) => {
  const bases = { 1: await officialBody(f, 1), 2: await officialBody(f, 2) }
  // The bases themselves are valid (else every refusal below would prove nothing).
  for (const version of [1, 2] as const) t.equal((await f.facilitator.verify(structuredClone(bases[version]))).body.isValid, true, `v${version} base is valid`)
  const findings = new Findings()
  const reasons = new Map<string, number>()
  for (const c of fc.sample(cases, { numRuns: RUNS, seed: SEED })) {
    const applied = apply(bases[c.version], c)
    const outcome = await bounded(f.facilitator.verify(applied.body))
    const problem = problemWith('verify', outcome, applied)
    if (problem) findings.add(problem, c)
    if (!('thrown' in outcome)) tally(reasons, `${outcome.status} ${outcome.body.invalidReason ?? 'valid'}`)
  }
  t.comment(`verify: ${RUNS} cases; answers ${JSON.stringify(Object.fromEntries([...reasons].sort((a, b) => b[1] - a[1])))}`)
  findings.report(t)
})

t.test('verify: hand-built layouts mutated and re-signed', async (t) => {
  // A hand-built v0 transaction (limit, price, transfer, memo) reaches other decoder paths.
  const base = bodyV2(f, await craft(f, await standard(f)))
  t.equal((await f.facilitator.verify(structuredClone(base))).body.isValid, true, 'base is valid')
  const findings = new Findings()
  const byteCases = fc.record({ version: fc.constant<2>(2), mutation: fc.oneof(
    fc.record({ kind: fc.constant('resign' as const), pos: fc.nat({ max: 1231 }), mask: fc.integer({ min: 1, max: 255 }) }),
    fc.record({ kind: fc.constant('flip' as const), pos: fc.nat({ max: 1231 }), mask: fc.integer({ min: 1, max: 255 }) }),
  ) as fc.Arbitrary<Mutation> })
  const runs = RUNS
  for (const c of fc.sample(byteCases, { numRuns: runs, seed: SEED + 1 })) {
    const applied = apply(base, c)
    const problem = problemWith('verify', await bounded(f.facilitator.verify(applied.body)), applied)
    if (problem) findings.add(problem, c)
  }
  t.comment(`verify (hand-built): ${runs} cases`)
  findings.report(t)
})

t.test('settle: a mutated payment moves funds only when verify accepts it, once', async (t) => {
  const payee = f.local.accounts.payee.address
  const payer = f.local.accounts.payer.address
  const findings = new Findings()
  const runs = RUNS
  const answers = new Map<string, number>()
  let settled = 0
  for (const c of fc.sample(cases, { numRuns: runs, seed: SEED + 2 })) {
    // A fresh payment per case: a valid mutation settles it, and the next case must not find it settled.
    const applied = apply(await officialBody(f, c.version), c)
    const before = { payee: await f.local.tokenBalance(payee), payer: await f.local.tokenBalance(payer), sent: f.local.front.executed.length }
    const verdict = await bounded(f.facilitator.verify(structuredClone(applied.body)))
    const outcome = await bounded(f.facilitator.settle(structuredClone(applied.body)))
    const problem = problemWith('settle', outcome, applied)
    if (problem) findings.add(problem, c)
    if ('thrown' in outcome || 'thrown' in verdict) continue
    tally(answers, `${outcome.status} ${outcome.body.errorReason ?? 'success'}`)
    const after = { payee: await f.local.tokenBalance(payee), payer: await f.local.tokenBalance(payer), sent: f.local.front.executed.length }
    const moved = after.payee - before.payee
    if (outcome.body.success === true) {
      settled++
      if (verdict.body.isValid !== true) findings.add(`settled what verify refused (${verdict.body.invalidReason})`, c)
      if (after.sent - before.sent !== 1 || moved !== BigInt(price) || before.payer - after.payer !== BigInt(price)) {
        findings.add(`a success moved ${moved} in ${after.sent - before.sent} transactions`, c)
      }
    } else {
      if (after.sent !== before.sent || moved !== 0n || after.payer !== before.payer) findings.add(`a refusal (${outcome.body.errorReason}) sent a transaction or moved funds`, c)
      if (verdict.body.isValid === false && verdict.body.invalidReason !== outcome.body.errorReason) {
        findings.add(`settle refused under ${outcome.body.errorReason}, verify under ${verdict.body.invalidReason}`, c)
      }
      if (verdict.body.isValid === true) findings.add(`verify accepted, settle refused (${outcome.body.errorReason})`, c)
    }
  }
  t.comment(`settle: ${runs} cases, ${settled} settled; answers ${JSON.stringify(Object.fromEntries([...answers].sort((a, b) => b[1] - a[1])))}`)
  findings.report(t)
})

t.test('verify: random instruction layouts, signed by the payer (ours accepts only what the official facilitator accepts)', async (t) => {
  const recipients = { payee: f.local.accounts.payee.address, payer: f.local.accounts.payer.address, poor: f.local.accounts.poor.address }
  const programs = ['11111111111111111111111111111111', 'TokenkegQfeZyiNwAJbNbGKPFXCWuBvf9Ss623VQ5DA', 'Stake11111111111111111111111111111111111111',
    'L2TExMFKdjpN9kozasaurPirfHy9P8sbXoAN1qA3S95', 'MemoSq4gqABAXKb96qnH8TysNcWxMyWCqXgDLGmfcHr', 'ComputeBudget111111111111111111111111111111'] as Address[]
  const u64s = fc.constantFrom(0n, 1n, 9_999n, 10_000n, 10_001n, 5_000_000n, 5_000_001n, 2n ** 32n, 2n ** 64n - 1n)
  type Spec =
    | { ix: 'limit'; units: number }
    | { ix: 'price'; micro: bigint }
    | { ix: 'transfer'; token2022: boolean; program2022: boolean; amount: bigint; decimals: number; to: keyof typeof recipients; feePayerAuthority: boolean }
    | { ix: 'memo'; text: string; accounts: ('poor' | 'feePayer')[] }
    | { ix: 'raw'; program: number; data: number[] }
  const spec: fc.Arbitrary<Spec> = fc.oneof(
    fc.record({ ix: fc.constant('limit' as const), units: fc.constantFrom(0, 1, 20_000, 200_000, 200_001, 1_400_000, 2 ** 32 - 1) }),
    fc.record({ ix: fc.constant('price' as const), micro: u64s }),
    fc.record({
      ix: fc.constant('transfer' as const), token2022: fc.boolean(), program2022: fc.boolean(), amount: u64s, decimals: fc.constantFrom(6, 6, 0, 9, 255),
      to: fc.constantFrom<keyof typeof recipients>('payee', 'payee', 'payer', 'poor'), feePayerAuthority: fc.boolean(),
    }),
    fc.record({ ix: fc.constant('memo' as const), text: fc.string({ maxLength: 40 }), accounts: fc.array(fc.constantFrom<'poor' | 'feePayer'>('poor', 'feePayer'), { maxLength: 2 }) }),
    fc.record({ ix: fc.constant('raw' as const), program: fc.nat({ max: programs.length - 1 }), data: fc.array(fc.nat({ max: 255 }), { maxLength: 12 }) }),
  )
  // Mostly the standard prefix (limit, price, transfer) with random tails, sometimes anything.
  const layout = fc.oneof(
    fc.tuple(
      fc.constant<Spec[]>([{ ix: 'limit', units: 20_000 }, { ix: 'price', micro: 1n }]),
      fc.oneof({ arbitrary: fc.constant<Spec>({ ix: 'transfer', token2022: false, program2022: false, amount: 10_000n, decimals: 6, to: 'payee', feePayerAuthority: false }), weight: 3 }, { arbitrary: spec, weight: 1 }),
      fc.array(spec, { maxLength: 5 }),
    ).map(([head, transfer, tail]) => [...head, transfer, ...tail]),
    fc.array(spec, { maxLength: 8 }),
  )
  const build = async (s: Spec) => {
    switch (s.ix) {
      case 'limit': return ix.limit(s.units)
      case 'price': return ix.price(s.micro)
      case 'memo': return ix.memo(s.text || 'm', s.accounts.map((a) => (a === 'poor' ? recipients.poor : f.feePayer) as Address))
      case 'raw': return { programAddress: programs[s.program]!, accounts: [], data: new Uint8Array(s.data) }
      case 'transfer': return ix.transfer(f, {
        mint: s.token2022 ? f.local.mint2022 : f.local.mint, program: (s.program2022 ? 'TokenzQdBNbLqP5VEhdkAS6EPFLC1PHnBqCXEpPxuEb' : 'TokenkegQfeZyiNwAJbNbGKPFXCWuBvf9Ss623VQ5DA') as Address,
        amount: s.amount, decimals: s.decimals, destinationOwner: recipients[s.to], authority: s.feePayerAuthority ? f.feePayer as Address : undefined,
      })
    }
  }
  const findings = new Findings()
  const runs = RUNS
  let valid = 0
  const reasons = new Map<string, number>()
  for (const specs of fc.sample(layout, { numRuns: runs, seed: SEED + 3 })) {
    const c: Case = { version: 2, mutation: { kind: 'body', value: specs.map((s) => JSON.parse(JSON.stringify(s, (_, v) => (typeof v === 'bigint' ? String(v) : v)))) } }
    let transaction: string
    try {
      transaction = await craft(f, await Promise.all(specs.map(build)))
    } catch {
      continue // kit refuses to compile it (e.g. too large): no payment a client could send
    }
    const body = bodyV2(f, transaction)
    const applied: Applied = { body, mustFail: false }
    const outcome = await bounded(f.facilitator.verify(structuredClone(body)))
    const problem = problemWith('verify', outcome, applied)
    if (problem) findings.add(problem, c)
    if (!('thrown' in outcome)) tally(reasons, outcome.body.invalidReason ?? 'valid')
    if ('thrown' in outcome || outcome.body.isValid !== true) continue
    valid++
    const official = await officialVerdict(f, body)
    if (!official.isValid) findings.add(`ours accepts what the official facilitator refuses (${official.invalidReason})`, c)
  }
  t.comment(`verify (layouts): ${runs} cases, ${valid} valid; answers ${JSON.stringify(Object.fromEntries([...reasons].sort((a, b) => b[1] - a[1])))}`)
  findings.report(t)
})
