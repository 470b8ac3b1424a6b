// The limits of the control values every store keeps (pauses, feed positions): one check, so
// every store refuses the same names and values with the same words.

import { CONTROL_NAME_MAX } from '../../store-operations.js';

/** Refuses a control name or value a SQL store could not keep, so every store says the same. */
export function checkControl(name: string, value: string | undefined): void {
  if (typeof name !== 'string' || name === '' || name.length > CONTROL_NAME_MAX)
    throw new TypeError(
      `panel-license-guard: a control name is a non-empty string of at most ${CONTROL_NAME_MAX} characters, received ${String(name).length} characters.`,
    );
  if (value !== undefined && (typeof value !== 'string' || value.length > 64))
    throw new TypeError(`panel-license-guard: a control value is a string of at most 64 characters (control "${name}").`);
}
