// The records this instance publishes, one write after another; one the store does not take is
// kept and offered again until it does (unshared-verdict.ts).
import type { LicenseStore } from '../../license-store/license-store.js';
import type { Mac } from '../../license-store/sealed-json.js';
import { callStore } from '../../license-store/store-calls.js';
import { encodeSharedVerdict, MAX_RECORD_BYTES, type SharedVerdict } from './shared-verdict.js';
import { genuineOrUndefined, UnsharedVerdict } from './unshared-verdict.js';

export interface VerdictWritesOptions {
  store: LicenseStore;
  panelId: string;
  mac: Mac;
  recordTtlMs: number;
  /** The record's key (`<panel id>:verdict`). */
  key: string;
  /** The store answered (a write, or a kept record's offer). */
  answered(): void;
  /** A write failed. */
  failed(error: unknown): void;
}

export class VerdictWrites {
  private writes: Promise<void> = Promise.resolve();
  private readonly unshared: UnsharedVerdict;

  constructor(private readonly options: VerdictWritesOptions) {
    const { store, key, panelId, mac } = options;
    this.unshared = new UnsharedVerdict({
      read: () => callStore(() => store.get(key, MAX_RECORD_BYTES)),
      publish: (text) => this.write(text),
      decode: (text) => genuineOrUndefined(text, panelId, mac),
      answered: options.answered,
    });
  }

  /** Publishes the result of a check this instance ran. */
  share(record: SharedVerdict): void {
    const text = encodeSharedVerdict(record, this.options.panelId, this.options.mac);
    this.unshared.superseded(record);
    this.write(text).then(this.options.answered, (error: unknown) => {
      this.options.failed(error);
      this.unshared.keep(record, text);
    });
  }

  /** Publishes `text` after every write already under way. */
  private write(text: string): Promise<void> {
    const { store, key, recordTtlMs } = this.options;
    const written = this.writes.then(() => callStore(() => store.publish(key, text, recordTtlMs)));
    this.writes = written.catch(() => {});
    return written;
  }

  /** Stops offering; resolves once a write under way has settled. */
  async close(): Promise<void> {
    this.unshared.close();
    await this.writes;
  }
}
