/**
 * Two steps of the typical chain alone, for instruction counts of one change (session 13, chain31c):
 *
 * - `lookup`: `ProjectDirectory.lookupKey` of a fresh key string (as a request's path param is), in a
 *   directory of 100 keys;
 * - `map` / `slot` / `none`: a request's context with the credit meter's per-request record kept in
 *   `ctx.state` (a Map), in a `RequestSlot` (trees that have it), or nowhere (the context alone): set,
 *   two reads and the read of `credits.refund` that settling does.
 *
 * Instructions per call: run under callgrind with N and 3N and divide the difference by 2N (start-up,
 * module loading and the 50,000-call warm-up cancel out):
 *
 *   valgrind --tool=callgrind node --import tsx bench/chain-micro.ts ROOT lookup|map|slot|none N
 *
 * ROOT is a tree (this checkout, or a revision unpacked with `git archive REV | tar -x -C DIR`).
 */
import { join, resolve } from 'node:path'

const root = resolve(process.argv[2] ?? '.')
const mode = process.argv[3] ?? 'lookup'
const n = Number(process.argv[4] ?? 100_000)
const WARMUP = 50_000
let sink = 0

if (mode === 'lookup') {
  const { ProjectDirectory, hashCredential } = await import(join(root, 'core/projects/projects.ts'))
  const KEY = 'bench-key-0123456789abcdef0123456789abcdef'
  const keys = Array.from({ length: 100 }, (_, i) => ({ label: `k${i}`, hash: hashCredential(i === 50 ? KEY : `other-${i}`), disabled: false }))
  const directory = new ProjectDirectory([{ id: 'bench', name: 'bench', plan: 'e', scopes: new Set(['rpc']), credits: { allocation: 1, period: 'month' }, keys, settings: {} }])
  // A new string each call, as a request's param is: its hash is not cached yet.
  const lookup = () => (directory.lookupKey((KEY + ' ').trimEnd()).ok ? 1 : 0)
  for (let i = 0; i < WARMUP; i++) sink += lookup()
  for (let i = 0; i < n; i++) sink += lookup()
} else if (mode === 'map' || mode === 'slot' || mode === 'none') {
  const { Context, RequestSlot } = await import(join(root, 'core/proxy/context.ts'))
  if (mode === 'slot' && RequestSlot === undefined) throw new Error(`${root} has no RequestSlot`)
  const slot = mode === 'slot' ? new RequestSlot() : undefined
  const one = (i: number) => {
    const ctx = new Context('GET', '/x', '', {}, '127.0.0.1')
    const record = { amount: i }
    if (mode === 'map') {
      ctx.state.set('credit-meter', record)
      sink += ctx.state.get('credit-meter').amount + ctx.state.get('credit-meter').amount + (ctx.state.get('credits.refund') === undefined ? 1 : 0)
    } else if (slot !== undefined) {
      slot.set(ctx, record)
      sink += slot.get(ctx).amount + slot.get(ctx).amount + (ctx.stateValue('credits.refund') === undefined ? 1 : 0)
    } else sink += record.amount
  }
  for (let i = 0; i < WARMUP; i++) one(i)
  for (let i = 0; i < n; i++) one(i)
} else throw new Error(`unknown mode ${mode}: lookup, map, slot or none`)
console.log(JSON.stringify({ root, mode, n, sink }))
