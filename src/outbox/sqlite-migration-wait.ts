// Telling a process that migrates an outbox file from one that merely holds its write lock. A
// migration of a large file holds the lock for seconds (the v5 indexes: about 3.5 s per million
// rows), and a second process opening the file then must wait for it rather than fail after its
// busy timeout; but a process that holds the lock for another reason (a stopped writer, an
// operator's sqlite3 shell) must not freeze an opener for minutes, since opening is synchronous.
// So the migrating process says so in a file beside the outbox, with its pid, while it migrates.
import { readFileSync, rmSync, writeFileSync } from 'node:fs';

/** How long an opener waits for another process's migration of the file: minutes for tens of millions of rows. */
export const MIGRATION_WAIT_MS = 10 * 60_000;

export interface MigrationNotice {
  /** Says this process is migrating the file (under its write lock). */
  announce(): void;
  /** Takes back what `announce()` said. */
  withdraw(): void;
  /** Whether a live process other than this one says it is migrating the file now. */
  othersMigrating(): boolean;
}

export function migrationNotice(file: string): MigrationNotice {
  const notice = `${file}-migrating`;
  let announced = false;
  return {
    announce() {
      if (file === ':memory:') return;
      writeFileSync(notice, String(process.pid));
      announced = true;
    },
    withdraw() {
      if (!announced) return;
      rmSync(notice, { force: true });
      announced = false;
    },
    othersMigrating() {
      let pid: number;
      try {
        pid = Number(readFileSync(notice, 'utf8'));
      } catch {
        return false;
      }
      return Number.isInteger(pid) && pid > 0 && pid !== process.pid && isAlive(pid);
    },
  };
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
