/**
 * The batch's own submittable query (apply-query.ts) against the real PostgreSQL: a function of
 * the schema stands in for `tollgate_apply`'s signature, raising an error with a chosen SQLSTATE
 * when asked. Checks that the error reaches the caller with its code, that the same connection then
 * serves the next call, that each new connection parses the named statement again, and that a call
 * that hangs is ended by the client's query_timeout.
 */
import t from 'tap'
import pg from 'pg'
import { ApplyQuery } from '../../../core/store/shared/apply-query.ts'
import { freshSchema, needServers, PG_URL } from '../../helpers/shared-servers.ts'

const STATEMENT = { name: 'apply_query_test', text: 'SELECT test_apply($1::jsonb, $2) AS r' }

async function connect(t: { teardown(fn: () => unknown): void }, schema: string, queryTimeout?: number): Promise<pg.Client> {
  const client = new pg.Client({ connectionString: PG_URL, options: `-c search_path="${schema}"`, query_timeout: queryTimeout })
  client.on('error', () => {})
  await client.connect()
  t.teardown(() => client.end().catch(() => {}))
  return client
}

const call = (client: pg.Client, ops: string, owner = 'me') => client.query(new ApplyQuery(STATEMENT, [ops, owner])).promise

t.test('errors keep their SQLSTATE, the connection serves the next call, a new connection parses again', async (t) => {
  if (!(await needServers(t))) return
  const schema = freshSchema(t)
  const setup = await connect(t, 'public')
  await setup.query(`CREATE SCHEMA "${schema}"`)
  await setup.query(`CREATE FUNCTION "${schema}".test_apply(ops jsonb, owner text) RETURNS jsonb LANGUAGE plpgsql AS $$
    BEGIN
      IF ops->0->>'o' = 'fail' THEN RAISE EXCEPTION 'forced' USING ERRCODE = ops->0->>'code'; END IF;
      IF ops->0->>'o' = 'sleep' THEN PERFORM pg_sleep((ops->0->>'s')::float); END IF;
      RETURN jsonb_build_object('ops', ops, 'owner', owner, 'n', 12345678901);
    END $$`)

  const client = await connect(t, schema)
  t.same(await call(client, '[{"o":"draw","a":1.5}]'), { ops: [{ o: 'draw', a: 1.5 }], owner: 'me', n: 12345678901 }, 'the jsonb value, parsed')
  for (const code of ['40P01', '40001', 'P0001']) {
    const error = await call(client, `[{"o":"fail","code":"${code}"}]`).then(() => undefined, (error: unknown) => error)
    t.match(error, { code, message: 'forced' }, `a raised ${code} reaches the caller with its SQLSTATE`)
    t.same(await call(client, '[{"o":"ok"}]', 'next'), { ops: [{ o: 'ok' }], owner: 'next', n: 12345678901 }, `after ${code}, the same connection serves the next call`)
  }
  const connection = (client as unknown as { connection: { parsedStatements: Record<string, string> } }).connection
  t.equal(connection.parsedStatements[STATEMENT.name], STATEMENT.text, 'parsed once, kept as pg keeps its named statements')

  // A replaced connection has no statement on the server: it must send Parse again, or Bind fails.
  const replacement = await connect(t, schema)
  t.same(await call(replacement, '[]'), { ops: [], owner: 'me', n: 12345678901 }, 'a new connection parses the statement again')
  // A statement that fails to parse (no such function yet) is parsed again on the next call.
  const empty = freshSchema(t)
  await setup.query(`CREATE SCHEMA "${empty}"`)
  const early = await connect(t, empty)
  t.match(await call(early, '[]').then(() => undefined, (error: unknown) => error), { code: '42883' }, 'an unknown function reaches the caller (42883)')
  await setup.query(`CREATE FUNCTION "${empty}".test_apply(ops jsonb, owner text) RETURNS jsonb LANGUAGE sql AS $$ SELECT ops $$`)
  t.same(await call(early, '[1]'), [1], 'the failed Parse is sent again once the function exists')

  const slow = await connect(t, schema, 200)
  const timedOut = await call(slow, '[{"o":"sleep","s":2}]').then(() => undefined, (error: unknown) => error)
  t.match(timedOut, { message: /timeout/i }, 'a call that hangs is ended by query_timeout')
})
