/**
 * Per-request values of the context: request slots (one typed value per request for the module
 * that made the slot) and `ctx.state` read without being made.
 */
import t from 'tap'
import { Context } from '../../../core/proxy/context.ts'
import { RequestSlot } from '../../../core/proxy/plugin-api.ts'

const request = () => new Context('GET', '/x', '', {}, '127.0.0.1')

t.test('a slot holds one value per request, apart from every other slot', async (t) => {
  const meter = new RequestSlot<{ amount: number }>()
  const paid = new RequestSlot<string>()
  const a = request()
  const b = request()
  t.equal(meter.get(a), undefined, 'nothing before a set')
  meter.set(a, { amount: 3 })
  t.same(meter.get(a), { amount: 3 })
  t.equal(paid.get(a), undefined, 'another slot of the same request is still empty')
  t.equal(meter.get(b), undefined, 'another request does not see it')
  paid.set(a, 'tx-1')
  meter.set(a, { amount: 4 })
  t.equal(paid.get(a), 'tx-1')
  t.same(meter.get(a), { amount: 4 }, 'a second set replaces the value')
  const late = new RequestSlot<number>()
  late.set(a, 7)
  t.equal(late.get(a), 7, 'a slot made after the request started still works')
  t.equal(paid.get(a), 'tx-1')
})

t.test('stateValue reads ctx.state, undefined when nothing was set', async (t) => {
  const ctx = request()
  t.equal(ctx.stateValue('credits.refund'), undefined)
  ctx.state.set('credits.refund', 2)
  t.equal(ctx.stateValue('credits.refund'), 2)
  t.equal(ctx.stateValue('other'), undefined)
})
