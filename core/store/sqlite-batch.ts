/**
 * Group commit for the SQLite engine. A write transaction costs far more to commit (WAL frames,
 * page writes, the write() into the WAL) than its few statements cost to run, and every metered
 * request makes two of them (reserve, then commit or release). So write operations are queued, and
 * everything queued during one event-loop turn runs in order inside ONE transaction, at the next
 * check phase (setImmediate). Many concurrent requests then share one commit.
 *
 * - Order: operations run in the order they were queued, each against the state the previous ones
 *   left, so a check-and-write decides exactly as it would have one transaction at a time.
 * - Durability: an operation's promise settles only after its batch's COMMIT returned.
 * - Failures: an operation that throws rolls the batch back; the operations before it are run again
 *   (same order, same state, same results) and committed, the failing one is rejected with its own
 *   error, and those after it continue as the next batch. Every operation is a pure function of the
 *   database state and its arguments, so running it again is safe. A failed COMMIT (disk full, I/O
 *   error) falls back to one transaction per operation, so each gets its own outcome.
 *   (A SAVEPOINT per operation would isolate failures without the rerun, but costs two more
 *   statements for every operation, while failures are rare bugs: see the batching measurements.)
 * - Reads that must see every write queued before them call {@link WriteBatcher.drain} first.
 */
import type Database from 'better-sqlite3'

/** Most operations in one transaction, so one flush stays short (about a millisecond). */
export const MAX_BATCH_OPS = 1000

interface QueuedOp {
  run: () => unknown
  /**
   * The operation is one SQL statement (or says so when asked, just before it runs alone): alone in
   * its batch, it runs as its own (auto-commit) transaction.
   */
  singleStatement: boolean | (() => boolean)
  resolve: (value: unknown) => void
  reject: (error: unknown) => void
}

/** Counters of the group commit since the store was opened. */
export interface WriteBatchStats {
  /** Transactions committed for queued operations. */
  transactions: number
  /** Queued operations settled (resolved or rejected). */
  operations: number
}

/**
 * The write queue of one SQLite connection.
 *
 * @example
 * ```ts
 * const writes = new WriteBatcher(db)
 * const changed = await writes.enqueue(() => stmt.run(id).changes) // settles after its batch committed
 * writes.drain() // before a read that must see what is queued
 * ```
 */
export class WriteBatcher {
  private queue: QueuedOp[] = []
  private scheduled: NodeJS.Immediate | undefined
  private closed = false
  private readonly counters: WriteBatchStats = { transactions: 0, operations: 0 }
  /** Runs `ops` in order in one transaction, pushing each result; throws (rolled back) on the first failure. */
  private readonly runInTransaction: (ops: readonly QueuedOp[], results: unknown[]) => void

  constructor(
    db: Database.Database,
    private readonly maxOps = MAX_BATCH_OPS,
  ) {
    if (!(Number.isInteger(maxOps) && maxOps >= 1)) throw new RangeError(`maxOps must be a positive integer, got ${maxOps}`)
    // Operations must not open transactions of their own: nested, they would become SAVEPOINTs.
    this.runInTransaction = db.transaction((ops: readonly QueuedOp[], results: unknown[]) => {
      for (const op of ops) results.push(op.run())
    })
  }

  /**
   * Queues `run` (synchronous SQLite work, no transaction of its own) for the next batch. The promise
   * settles with its result, or rejects with what it threw, once the batch has committed.
   * `singleStatement`: `run` executes exactly one SQL statement, so when it is alone in its batch it
   * skips BEGIN/COMMIT (the statement commits itself, with the same durability). A function is asked
   * at that moment, right before `run`, whether `run` will execute at most one statement (an operation
   * whose statements depend on what was added to it until it runs).
   */
  enqueue<T>(run: () => T, singleStatement: boolean | (() => boolean) = false): Promise<T> {
    if (this.closed) return Promise.reject(new Error('the store is closed'))
    return new Promise<T>((resolve, reject) => {
      this.queue.push({ run, singleStatement, resolve: resolve as (value: unknown) => void, reject })
      this.scheduled ??= setImmediate(this.flushScheduled)
    })
  }

  /** Runs everything queued now, synchronously. Reads call this to see the writes issued before them. */
  drain(): void {
    if (this.scheduled !== undefined) {
      clearImmediate(this.scheduled)
      this.scheduled = undefined
    }
    while (this.queue.length > 0) this.runBatch(this.takeBatch())
  }

  /** Drains, then refuses new operations. */
  close(): void {
    this.drain()
    this.closed = true
  }

  stats(): WriteBatchStats {
    return { ...this.counters }
  }

  private readonly flushScheduled = (): void => {
    this.scheduled = undefined
    this.runBatch(this.takeBatch())
    // Past the cap: the rest waits one more turn, so pending I/O callbacks get to run in between.
    if (this.queue.length > 0) this.scheduled = setImmediate(this.flushScheduled)
  }

  private takeBatch(): QueuedOp[] {
    if (this.queue.length <= this.maxOps) {
      const batch = this.queue
      this.queue = []
      return batch
    }
    return this.queue.splice(0, this.maxOps)
  }

  private runBatch(batch: QueuedOp[]): void {
    let ops = batch
    while (ops.length > 0) {
      const results: unknown[] = []
      const error = this.attempt(ops, results)
      if (error === undefined) return this.settle(ops, results)
      const failedAt = results.length
      // The COMMIT itself failed: the batch cannot tell whose fault it was.
      if (failedAt >= ops.length) return this.runOneByOne(ops)
      if (failedAt > 0) {
        const before = ops.slice(0, failedAt)
        const replayed: unknown[] = []
        if (this.attempt(before, replayed) === undefined) this.settle(before, replayed)
        else this.runOneByOne(before)
      }
      this.counters.operations++
      ops[failedAt]!.reject(error.cause)
      ops = ops.slice(failedAt + 1)
    }
  }

  private runOneByOne(ops: readonly QueuedOp[]): void {
    for (const op of ops) {
      const results: unknown[] = []
      const error = this.attempt([op], results)
      this.counters.operations++
      if (error === undefined) op.resolve(results[0])
      else op.reject(error.cause)
    }
  }

  /** Runs `ops` in one transaction; returns the failure (in `cause`) or undefined when committed. */
  private attempt(ops: readonly QueuedOp[], results: unknown[]): { cause: unknown } | undefined {
    try {
      if (ops.length === 1 && isSingle(ops[0]!.singleStatement)) results.push(ops[0]!.run())
      else this.runInTransaction(ops, results)
      this.counters.transactions++
      return undefined
    } catch (cause) {
      return { cause }
    }
  }

  private settle(ops: readonly QueuedOp[], results: readonly unknown[]): void {
    this.counters.operations += ops.length
    for (let i = 0; i < ops.length; i++) ops[i]!.resolve(results[i])
  }
}

/** Whether an operation runs one statement: its flag, or its answer when it decides at run time. */
function isSingle(single: boolean | (() => boolean)): boolean {
  return single === true || (single !== false && single())
}
