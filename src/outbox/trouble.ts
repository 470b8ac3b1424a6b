// Reporting a failure that repeats (a database down, polled every second) without a flood.

export interface TroubleReporter {
  /** Reports the first failure of a run, then at most once per `repeatMs` while it lasts. */
  report(error: unknown): void;
  /** The operation succeeded: the next failure starts a new run and is reported at once. */
  recovered(): void;
}

export function createTroubleReporter(repeatMs: number, now: () => number, emit: (error: unknown) => void): TroubleReporter {
  let lastReportedAt: number | undefined;
  return {
    report(error) {
      const at = now();
      if (lastReportedAt !== undefined && at - lastReportedAt < repeatMs && at >= lastReportedAt) return;
      lastReportedAt = at;
      emit(error);
    },
    recovered() {
      lastReportedAt = undefined;
    },
  };
}
