/** The default error format: `{"error":{"code","message"}}`. */
import type { ErrorFormatter } from './plugin.ts'

export const jsonErrorFormat: ErrorFormatter = (error) => ({
  status: error.status,
  headers: { 'content-type': 'application/json; charset=utf-8', ...error.headers },
  body: JSON.stringify({ error: { code: error.code, message: error.message } }),
})
