// Minimal types for the parts of autocannon 8 the bench uses (the package ships none).
declare module 'autocannon' {
  import type { EventEmitter } from 'node:events'

  interface Options {
    url: string
    connections?: number
    duration?: number
    overallRate?: number
    timeout?: number
  }

  interface Result {
    duration: number
    errors: number
    timeouts: number
    non2xx: number
    requests: { total: number }
  }

  type Instance = EventEmitter & PromiseLike<Result>

  function autocannon(options: Options): Instance
  export default autocannon
}
