// The LicenseStore contract, run against every store on its real server: values with a time to
// live, reads capped in the store, leases that only expire on the store's clock, announcements
// between instances (also after the listening connection broke), one listening connection for
// many keys.
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { pgLicenseNames } from '../../src/license-store/postgres/postgres-license-schema.js';
import { sleep, waitFor } from '../support/helpers.js';
import { STORE_BACKENDS } from '../support/license-stores.js';
import { DATABASE_URL } from '../support/services.js';

const backends = await Promise.all(
  Object.values(STORE_BACKENDS).map(async (make) => {
    const backend = make();
    return { backend, name: backend.name, available: await backend.available() };
  }),
);
afterAll(async () => {
  for (const { backend, available } of backends) if (available) await backend.cleanup();
});

describe.each(backends)('the $name license store', ({ backend, available }) => {
  it.skipIf(!available)('keeps a value for its time to live, and reads at most a little more than the cap', async () => {
    const namespace = backend.namespace();
    const store = await backend.open(namespace);
    expect(await store.get('p1:verdict', 1000)).toBeNull();
    await store.publish('p1:verdict', 'sealed-value', 400);
    expect(await store.get('p1:verdict', 1000)).toBe('sealed-value');
    await store.publish('p1:big', 'x'.repeat(100_000), 60_000);
    const capped = await store.get('p1:big', 100);
    expect(capped?.length).toBeGreaterThan(100);
    expect(capped?.length).toBeLessThanOrEqual(101);
    await sleep(700);
    expect(await store.get('p1:verdict', 1000)).toBeNull();
  });

  it.skipIf(!available)('gives a lease to one instance at a time until it expires, and says who holds it (capped)', async () => {
    const namespace = backend.namespace();
    const [a, b] = [await backend.open(namespace), await backend.open(namespace)];
    expect(await a.acquire('p1:lease', 'holder-a', 500, 200)).toBeNull();
    expect(await b.acquire('p1:lease', 'holder-b', 500, 200)).toBe('holder-a');
    expect(await a.acquire('p1:lease', 'holder-a2', 500, 200)).toBe('holder-a');
    await sleep(700);
    expect(await b.acquire('p1:lease', 'holder-b', 500, 200)).toBeNull();
    // A squatter's oversized value is read capped.
    await a.publish('p1:squatted', 'y'.repeat(50_000), 60_000);
    expect((await b.acquire('p1:squatted', 'holder-b', 500, 200))?.length).toBeLessThanOrEqual(201);
    // Many at once: exactly one wins.
    const results = await Promise.all(Array.from({ length: 8 }, (_, i) => (i % 2 ? a : b).acquire('p1:race', `racer-${i}`, 5000, 200)));
    expect(results.filter((holder) => holder === null)).toHaveLength(1);
  });

  it.skipIf(!available)('announces a published value to every instance listening (long values too), and no more once closed', async () => {
    const namespace = backend.namespace();
    const [writer, reader] = [await backend.open(namespace), await backend.open(namespace)];
    const heard: string[] = [];
    const subscription = reader.subscribe('p1:verdict', (value) => heard.push(value));
    const other = reader.subscribe('p2:verdict', (value) => heard.push(`p2 ${value}`));
    await Promise.all([subscription.ready, other.ready]);
    await writer.publish('p1:verdict', 'first', 60_000);
    const long = 'L'.repeat(20_000);
    await writer.publish('p1:verdict', long, 60_000);
    // The newest value is heard; a poll (MySQL, SQLite) may pass over one it replaced at once.
    await waitFor(() => heard.at(-1) === long, 'the newest announcement heard', 2000);
    expect(heard.filter((value) => value !== 'first' && value !== long)).toEqual([]);
    await subscription.close();
    await writer.publish('p1:verdict', 'after close', 60_000);
    await writer.publish('p2:verdict', 'still listening', 60_000);
    await waitFor(() => heard.includes('p2 still listening'), 'the other key still heard', 2000);
    expect(heard).not.toContain('after close');
    await other.close();
  });

  if (backend.name === 'PostgreSQL')
    it.skipIf(!available)(
      'listens on one connection for many keys, and after that connection is cut, hears again and re-reads what it missed',
      async () => {
        const namespace = backend.namespace();
        const [writer, reader] = [await backend.open(namespace), await backend.open(namespace)];
        const heard = new Map<string, string[]>();
        const subscriptions = Array.from({ length: 200 }, (_, i) =>
          reader.subscribe(`p${i}:verdict`, (value) => heard.set(`p${i}`, [...(heard.get(`p${i}`) ?? []), value])),
        );
        await Promise.all(subscriptions.map((subscription) => subscription.ready));
        const admin = new pg.Client({ connectionString: DATABASE_URL });
        await admin.connect();
        try {
          const { channel } = pgLicenseNames(`test_license_${process.pid}`, namespace);
          const listening = async () => (await admin.query('SELECT pid FROM pg_stat_activity WHERE query = $1', [`LISTEN "${channel}"`])).rows;
          expect(await listening()).toHaveLength(1);
          // Cut the listening connection, and publish while it is away.
          await admin.query('SELECT pg_terminate_backend($1)', [(await listening())[0]?.pid]);
          await writer.publish('p7:verdict', 'while away', 60_000);
          await waitFor(() => heard.get('p7')?.includes('while away') === true, 'the missed announcement re-read', 5000);
          await writer.publish('p8:verdict', 'after', 60_000);
          await waitFor(() => heard.get('p8')?.includes('after') === true, 'heard again on the new connection', 3000);
        } finally {
          await admin.end();
          await Promise.all(subscriptions.map((subscription) => subscription.close()));
        }
      },
      20_000,
    );
});
