/**
 * Running one phase's plugin steps in order (request, body, response), for pipeline.ts.
 */
import type { Context } from './context.ts'
import type { Step } from './table.ts'

/**
 * Runs a phase's steps. While they answer synchronously (the embedded engine's auth, meter and rate
 * limit do) nothing is awaited and no promise is made: an async runner, and the caller's await of
 * it, cost a promise, an await and a microtask turn per phase per request. From the first step
 * that returns a promise on, the rest run in {@link continueSteps}. A step that throws throws here.
 * The promise returned is the phase's end, awaited by the caller; it may be the last step's own.
 */
export function runSteps(steps: Step[], ctx: Context): Promise<void> | undefined {
  for (let i = 0; i < steps.length; i++) {
    const result = steps[i](ctx)
    // The last step's promise is the phase's: nothing runs after it (the meter's commit in the
    // response phase), so no async continuation, with its promise and await, is made around it.
    if (result) return i === steps.length - 1 ? result : continueSteps(steps, i, result, ctx)
    if (ctx.answered) return undefined
  }
  return undefined
}

async function continueSteps(steps: Step[], at: number, pending: Promise<void>, ctx: Context): Promise<void> {
  await pending
  if (ctx.answered) return
  for (let i = at + 1; i < steps.length; i++) {
    const result = steps[i](ctx)
    if (result) await result
    if (ctx.answered) return
  }
}
