// Telling a process that migrates an outbox file from one that merely holds its write lock. A
// migration of a large file holds the lock for seconds (the v5 indexes: about 3.5 s per million
// rows), and a second process opening the file then must wait for it rather than fail after its
// busy timeout; but a process that holds the lock for another reason (a stopped writer, an
// operator's sqlite3 shell) must not freeze an opener for minutes, since opening is synchronous.
// So the migrating process says so in a file beside the outbox (beside its real path, whatever
// link it was opened through) while it migrates: its host, its pid and when it began.
import { readFileSync, readlinkSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { hostname } from 'node:os';

/** How long an opener waits for another process's migration of the file: minutes for tens of millions of rows. */
export const MIGRATION_WAIT_MS = 10 * 60_000;

export interface MigrationNotice {
  /** Says this process is migrating the file (under its write lock). */
  announce(): void;
  /** Takes back what `announce()` said. */
  withdraw(): void;
  /**
   * Whether another process says it is migrating the file now: one of this host and pid
   * namespace that is alive, or one of another (a second container on the same volume, whose
   * pids are not ours to look up) that began less than MIGRATION_WAIT_MS ago. A notice left by a crashed migrator is
   * believed no longer than that either.
   */
  othersMigrating(): boolean;
}

interface Notice {
  host: string;
  /** The pid namespace the pid belongs to (Linux; a container has its own). */
  ns: string | null;
  pid: number;
  at: number;
}

export function migrationNotice(file: string): MigrationNotice {
  const memory = file === ':memory:';
  const path = () => `${realPath(file)}-migrating`;
  let written: string | undefined;
  return {
    announce() {
      if (memory) return;
      const at = path();
      // Best effort: where no file can be made beside the outbox, the migration goes on without
      // one (a second opener then fails after its busy timeout, as it would without notices).
      try {
        writeFileSync(at, JSON.stringify({ host: hostname(), ns: pidNamespace(), pid: process.pid, at: Date.now() } satisfies Notice));
        written = at;
      } catch {
        written = undefined;
      }
    },
    withdraw() {
      if (written === undefined) return;
      rmSync(written, { force: true });
      written = undefined;
    },
    othersMigrating() {
      if (memory) return false;
      let notice: Partial<Notice>;
      try {
        notice = JSON.parse(readFileSync(path(), 'utf8')) as Partial<Notice>;
      } catch {
        return false;
      }
      const { host, ns, pid, at } = notice;
      // Believed for MIGRATION_WAIT_MS from its start, and not at all when it claims to start
      // later than a minute from now (a clock far ahead, or a notice that is not one).
      const age = Date.now() - (typeof at === 'number' ? at : Number.NaN);
      if (typeof pid !== 'number' || !(age > -60_000 && age < MIGRATION_WAIT_MS)) return false;
      // Another host or pid namespace: its pid cannot be looked up here, only its age says.
      if (host !== hostname() || (ns ?? null) !== pidNamespace()) return true;
      return pid !== process.pid && isAlive(pid);
    },
  };
}

/** The file's real path (links resolved), so every opener finds the same notice. */
function realPath(file: string): string {
  try {
    return realpathSync(file);
  } catch {
    return file;
  }
}

/** Signal 0 asks whether the process exists (EPERM: it does, under another user). */
function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** This process's pid namespace (`pid:[…]` on Linux), or null where there is none to read. */
function pidNamespace(): string | null {
  try {
    return readlinkSync('/proc/self/ns/pid');
  } catch {
    return null;
  }
}
