// The order of license checks across a cluster: a hybrid logical clock with a tie-break.

/**
 * Where a check stands among all checks of the cluster: `stamp` is taken when the check starts
 * (the host's clock in ms, but above every stamp it has seen: a hybrid logical clock), and `by`
 * (the instance's random id) breaks ties, so two checks never compare equal and every instance
 * settles on the same one.
 */
export interface CheckOrder {
  stamp: number;
  by: string;
}

export const BEFORE_ANY: CheckOrder = Object.freeze({ stamp: 0, by: '' });

export function isAfter(a: CheckOrder, b: CheckOrder): boolean {
  return a.stamp > b.stamp || (a.stamp === b.stamp && a.by > b.by);
}

/** Whether `a` and `b` name the same check. */
export function sameCheck(a: CheckOrder, b: CheckOrder): boolean {
  return a.stamp === b.stamp && a.by === b.by;
}

export function later(a: CheckOrder, b: CheckOrder): CheckOrder {
  return isAfter(a, b) ? a : b;
}
