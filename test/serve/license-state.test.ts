import { describe, expect, it } from 'vitest';
import { daysLeft, type LicenseEvent, type LicenseState, transition } from '../../src/serve/license-state.js';

describe('transition()', () => {
  const table: [LicenseState, LicenseEvent, LicenseState][] = [
    ['pending', 'verified-active', 'active'],
    ['pending', 'verified-inactive', 'locked'],
    ['pending', 'check-failed', 'pending'],
    ['active', 'check-failed', 'grace'],
    ['active', 'verified-inactive', 'locked'],
    ['grace', 'check-failed', 'grace'],
    ['grace', 'grace-ended', 'locked'],
    ['grace', 'verified-active', 'active'],
    ['locked', 'check-failed', 'locked'],
    ['locked', 'grace-ended', 'locked'],
    ['locked', 'verified-active', 'active'],
  ];
  for (const [from, event, to] of table) {
    it(`${from} --${event}--> ${to}`, () => expect(transition(from, event)).toBe(to));
  }

  it('never unlocks without a verified active verdict', () => {
    for (const event of ['check-failed', 'grace-ended', 'verified-inactive'] as const) expect(transition('locked', event)).toBe('locked');
  });
});

describe('daysLeft()', () => {
  it('counts whole days until the end of the expiry day', () => {
    expect(daysLeft('2030-01-10', Date.UTC(2030, 0, 10, 8))).toBe(0);
    expect(daysLeft('2030-01-10', Date.UTC(2030, 0, 1, 8))).toBe(9);
    expect(daysLeft('2029-12-31', Date.UTC(2030, 0, 1))).toBe(0);
    expect(daysLeft(undefined, 0)).toBeNull();
  });
});
