// Fair claims across panels: round-robin order, and a claim asks only as many panels as it needs.
import { describe, expect, it } from 'vitest';
import { gatherHeads, panelRing, pickFairly } from '../../../../src/outbox/stores/shared/fair-claim.js';

const PANELS = Array.from({ length: 100 }, (_, i) => `p${String(i).padStart(3, '0')}`);
const nextPanel = (cursor: string) => PANELS.find((panel) => panel > cursor);

describe('fair claims', () => {
  it('goes round the panels from after the last one served, ending with it', () => {
    const ring = [...panelRing(nextPanel, 'p097')];
    expect(ring.slice(0, 3)).toEqual(['p098', 'p099', 'p000']);
    expect(ring.at(-1)).toBe('p097');
    expect(ring).toHaveLength(100);
    expect([...panelRing(nextPanel, '')]).toEqual(PANELS);
  });

  it('asks one panel for one free slot, not every panel (a claim per slot stays cheap with 1,000 panels)', () => {
    const asked: string[] = [];
    const dueOf = (panel: string, limit: number) => {
      asked.push(panel);
      return Array.from({ length: limit }, (_, i) => `${panel}#${i}`);
    };
    const one = gatherHeads(panelRing(nextPanel, 'p010'), { limit: 1, maxPanels: 64 }, dueOf);
    expect(asked).toEqual(['p011']);
    expect(pickFairly(one.heads, 1, one.resumeAfter)).toEqual({ rows: ['p011#0'], lastPanel: 'p011' });
    asked.length = 0;
    const three = gatherHeads(panelRing(nextPanel, 'p011'), { limit: 3, maxPanels: 64 }, dueOf);
    expect(asked).toEqual(['p012', 'p013', 'p014']);
    expect(pickFairly(three.heads, 3, three.resumeAfter).rows).toEqual(['p012#0', 'p013#0', 'p014#0']);
  });

  it('passes over panels with nothing due or held back, and goes on after the last panel asked', () => {
    const due = new Set(['p050', 'p090']);
    const dueOf = (panel: string) => (due.has(panel) ? [`${panel}#0`] : []);
    const visit = gatherHeads(panelRing(nextPanel, ''), { limit: 2, maxPanels: 10, skipPanels: ['p003'] }, dueOf);
    // Ten panels asked (p003 skipped without counting), none due: the next claim goes on after p010.
    expect(visit.heads).toEqual([]);
    expect(pickFairly(visit.heads, 2, visit.resumeAfter).lastPanel).toBe('p010');
    const whole = gatherHeads(panelRing(nextPanel, 'p010'), { limit: 2, maxPanels: 1000 }, dueOf);
    expect(pickFairly(whole.heads, 2, whole.resumeAfter)).toEqual({ rows: ['p050#0', 'p090#0'], lastPanel: 'p090' });
  });

  it('takes one row of a panel on probe, and every panel’s first row before any second', () => {
    const dueOf = (panel: string, limit: number) => Array.from({ length: Math.min(limit, 3) }, (_, i) => `${panel}#${i}`);
    const ring = ['a', 'b'];
    const { heads, resumeAfter } = gatherHeads(ring, { limit: 5, maxPanels: 10, probePanels: ['a'] }, dueOf);
    expect(pickFairly(heads, 5, resumeAfter).rows).toEqual(['a#0', 'b#0', 'b#1', 'b#2']);
  });
});
