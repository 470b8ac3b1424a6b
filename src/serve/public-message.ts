// What the panel's users are told while it is locked: a public message, apart from the operator's reason.
import { describeError, type StructuredLogger } from '../logger.js';
import { optionError, shown } from '../options.js';
import { cleanText, safeHttpUrl } from '../text.js';

/** What a `publicMessage` function is given. */
export interface PublicMessageInput {
  state: 'locked' | 'pending';
  /** The mother's reason (or the guard's, e.g. "could not be verified since…"); operator-facing. */
  reason: string | null;
  /** The panel's `status` and `billing_type` as the mother sent them. */
  status: string | null;
  billingType: string | null;
}

const PUBLIC_MESSAGE_MAX = 300;

const DEFAULT_MESSAGES: Record<PublicMessageInput['state'], string> = {
  locked: 'This panel is temporarily unavailable. Please try again later.',
  pending: 'This panel is starting up. Please try again in a moment.',
};

/**
 * Resolves the `publicMessage` option into a function of the verdict. The mother's reason is
 * about the operator's account ("Invoice overdue") and is not for the panel's artists, so by
 * default they get a neutral text. A function given by the host is user code: if it throws or
 * returns no usable text, the default is used and the problem is logged once.
 */
export function publicMessageFrom(option: unknown, logger: StructuredLogger): (input: PublicMessageInput) => string {
  if (option === undefined) return (input) => DEFAULT_MESSAGES[input.state];
  if (typeof option === 'string') {
    const message = cleanText(option, PUBLIC_MESSAGE_MAX);
    if (message === null) throw optionError('publicMessage', 'must not be empty', 'Pass a sentence for the lock page, or a function of the verdict.');
    return () => message;
  }
  if (typeof option !== 'function') {
    throw optionError('publicMessage', `must be a string or a function, received ${typeof option}`, 'Pass e.g. "Back soon." or ({ state }) => "…".');
  }
  let reported = false;
  return (input) => {
    let message: string | null = null;
    try {
      message = cleanText((option as (input: PublicMessageInput) => unknown)(input), PUBLIC_MESSAGE_MAX);
    } catch (error) {
      if (!reported)
        logger.error(`panel-license-guard: \`publicMessage\` threw; the default message is shown: ${describeError(error)}`, { event: 'public_message_threw' });
      reported = true;
    }
    return message ?? DEFAULT_MESSAGES[input.state];
  };
}

/** Where the lock page tells users to ask for help. */
export interface SupportContact {
  /** As given: `support@example.com` or `https://help.example.com/`. */
  readonly text: string;
  /** `mailto:` or the http(s) URL, for a link. */
  readonly href: string;
}

const EMAIL = /^[A-Za-z0-9.!#$%&'*+/=?^_`{|}~-]+@[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)+$/;

export function supportContactFrom(option: unknown): SupportContact | undefined {
  if (option === undefined) return undefined;
  // Shown as link text: nothing invisible that could make it read differently from its href.
  const visible = typeof option === 'string' && cleanText(option, 254) === option;
  if (visible && EMAIL.test(option)) {
    // The local part is encoded, so `x?bcc=spy@evil.example` cannot add mail headers.
    const at = option.lastIndexOf('@');
    return { text: option, href: `mailto:${encodeURIComponent(option.slice(0, at))}@${option.slice(at + 1)}` };
  }
  const url = visible ? safeHttpUrl(option) : null;
  if (url !== null) return { text: url, href: url };
  throw optionError(
    'supportContact',
    `must be an e-mail address or an http(s) URL, received ${shown(option)}`,
    'Pass e.g. "support@example.com" or "https://help.example.com".',
  );
}
