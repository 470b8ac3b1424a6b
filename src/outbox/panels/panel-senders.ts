// With `panels`: the credentials (and mother) of each panel through the user's resolver, and one client per distinct credentials.
import { createHash } from 'node:crypto';
import { LRUCache } from 'lru-cache';
import { createMotherClient, type MotherClient, type MotherClientOptions } from '../../client/mother-client.js';
import { PanelDeliveryError } from '../../errors.js';
import { describeError } from '../../logger.js';
import { shownPanel } from '../../panel-id.js';
import type { ReleaseSender } from '../release-sender.js';

/** What `panels.resolve(panel)` answers for a panel it knows. */
export interface OutboxPanelCredentials {
  apiKey: string;
  apiSecret: string;
  /** The mother of this panel; the outbox's `baseUrl` when left out. */
  baseUrl?: string | undefined;
}

export interface PanelSendersOptions {
  resolve: (panel: string) => OutboxPanelCredentials | null | undefined | Promise<OutboxPanelCredentials | null | undefined>;
  /** Mother of panels whose answer names none. */
  baseUrl: string | undefined;
  /** Client options shared by every panel (timeout, fetch, allowInsecureHttp). */
  clientOptions: Omit<MotherClientOptions, 'baseUrl' | 'apiKey' | 'apiSecret'>;
  resolveTtlMs: number;
  resolveTimeoutMs: number;
  /** Panels (and clients) remembered at once. */
  max: number;
  now: () => number;
}

/** How long a known panel's delivery waits for its credentials' refresh before using the known ones. */
const STALE_WAIT_MS = 100;

const delay = (ms: number): Promise<undefined> =>
  new Promise((resolve) => {
    setTimeout(() => resolve(undefined), ms).unref();
  });

type Answer = { sender: MotherClient; freshUntil: number } | { error: PanelDeliveryError; freshUntil: number };

export class PanelSenders {
  private readonly answers: LRUCache<string, Answer>;
  /** One client per base URL, key and secret: panels sharing credentials share a client. */
  private readonly clients: LRUCache<string, MotherClient>;
  private readonly asking = new Map<string, Promise<Answer>>();

  constructor(private readonly options: PanelSendersOptions) {
    this.answers = new LRUCache({ max: options.max });
    this.clients = new LRUCache({ max: options.max });
  }

  /**
   * The client to send `panel`'s releases with. Asks the resolver at most once per panel per
   * `resolveTtlMs` (concurrent asks share one call; a known panel's refresh runs in the
   * background); while the resolver fails, a panel it knew keeps its credentials. Throws
   * PANEL_UNRESOLVED when there are none.
   */
  async senderFor(panel: string): Promise<ReleaseSender> {
    let answer = this.answers.get(panel);
    if (answer !== undefined && 'sender' in answer && answer.freshUntil <= this.options.now()) {
      // Known credentials past their TTL: the resolver is asked again, and its answer used if it
      // comes within STALE_WAIT_MS (a rotated secret takes effect at once); otherwise the known
      // credentials go while it finishes in the background. A slow or hanging resolver delays a
      // known panel's delivery by STALE_WAIT_MS at most, never by `resolveTimeoutMs`.
      const stale = answer.sender;
      const fresh = await Promise.race([this.ask(panel), delay(STALE_WAIT_MS)]);
      if (fresh === undefined) return stale;
      if ('error' in fresh) throw fresh.error;
      return fresh.sender;
    }
    if (answer === undefined || answer.freshUntil <= this.options.now()) answer = await this.ask(panel);
    if ('error' in answer) throw answer.error;
    return answer.sender;
  }

  private ask(panel: string): Promise<Answer> {
    let pending = this.asking.get(panel);
    if (!pending) {
      pending = this.resolveNow(panel).finally(() => this.asking.delete(panel));
      this.asking.set(panel, pending);
    }
    return pending;
  }

  private async resolveNow(panel: string): Promise<Answer> {
    const { resolveTimeoutMs, resolveTtlMs, now } = this.options;
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`it did not answer within ${resolveTimeoutMs} ms`)), resolveTimeoutMs);
      timer.unref();
    });
    let answer: Answer;
    try {
      const value = await Promise.race([Promise.resolve().then(() => this.options.resolve(panel)), timeout]);
      answer = { ...this.answerFor(panel, value), freshUntil: now() + resolveTtlMs };
    } catch (error) {
      // A resolver that fails (its database down) does not take a known panel's credentials away.
      const previous = this.answers.peek(panel);
      if (previous && 'sender' in previous) return previous;
      answer = { error: unresolved(panel, `panels.resolve() failed for panel ${shownPanel(panel)}: ${describeError(error)}`, error), freshUntil: 0 };
    } finally {
      clearTimeout(timer);
    }
    this.answers.set(panel, answer);
    return answer;
  }

  private answerFor(panel: string, value: unknown): { sender: MotherClient } | { error: PanelDeliveryError } {
    if (value === null || value === undefined)
      return { error: unresolved(panel, `panels.resolve() knows no panel ${shownPanel(panel)} (it answered ${value}).`) };
    const given = value as Partial<OutboxPanelCredentials>;
    const baseUrl = given.baseUrl ?? this.options.baseUrl;
    if (typeof given.apiKey !== 'string' || typeof given.apiSecret !== 'string' || typeof baseUrl !== 'string')
      return {
        error: unresolved(
          panel,
          `panels.resolve() gave panel ${shownPanel(panel)} no usable credentials: it needs { apiKey, apiSecret } strings${this.options.baseUrl === undefined ? ' and a baseUrl (the outbox has none)' : ''}.`,
        ),
      };
    const key = `${baseUrl}\n${given.apiKey}\n${createHash('sha256').update(given.apiSecret).digest('hex')}`;
    let sender = this.clients.get(key);
    if (sender === undefined) {
      try {
        sender = createMotherClient({ ...this.options.clientOptions, baseUrl, apiKey: given.apiKey, apiSecret: given.apiSecret });
      } catch (error) {
        // The client's message names what is wrong, never the secret.
        return { error: unresolved(panel, `panels.resolve() gave panel ${shownPanel(panel)} credentials that cannot be used: ${describeError(error)}`) };
      }
      this.clients.set(key, sender);
    }
    return { sender };
  }
}

function unresolved(panel: string, message: string, cause?: unknown): PanelDeliveryError {
  return new PanelDeliveryError('PANEL_UNRESOLVED', panel, `panel-license-guard: ${message}`, cause === undefined ? undefined : { cause });
}
