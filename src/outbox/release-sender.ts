// What the outbox sends releases with: a MotherClient, or any object with the same push method.
import type { ReleaseResponse } from '../client/license-response.js';

/** What the outbox needs from a client. A `MotherClient` from `createMotherClient()` fits. */
export interface ReleaseSender {
  /** Sends these exact bytes; resolves with `{ ok: true, release_id }` or throws a `MotherError`. */
  pushSerializedRelease(body: string): Promise<ReleaseResponse>;
  /**
   * The panel whose releases this client sends (a `MotherClient`'s is a hash of base URL and
   * key). Rows record it, and a worker only ever sends rows of its own panel.
   */
  readonly panelId?: string;
  /** The longest a push can take, retries included; `leaseMs` must exceed it by `LEASE_MARGIN_MS` (a `MotherClient` has it). */
  readonly timeoutMs?: number;
}
