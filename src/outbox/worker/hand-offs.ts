// Hand-offs: while the worker's last claim found no more due rows than it took (no backlog for
// new rows to jump), the rows this process enqueues may be inserted already leased to the worker
// (EnqueueLease), sparing a claim each. Then only what a kick with news announces (an enqueue
// that was not handed off, a due retry, a requeue, a row handed back) can be due besides, or rows
// of another process, which the poll finds. This module keeps that account: when a claim may be
// skipped, when one is owed at once for news, and the leases given out.

/** The most a hand-off's enqueue is waited for when the worker stops (a caller's open transaction can hold its insert up). */
const LEASES_WAIT_MS = 5000;

export class HandOffs {
  /** The last claim came back short: the store had no more due rows for this worker. */
  private lastClaimShort = false;
  /** Kicks that may mean due rows, counted; the count when the last claim was made, and when the last short one was. */
  private news = 0;
  private newsClaimed = -1;
  private newsCovered = -1;
  /** A row was handed off since the last poll (a worker handed none claims as slots free up). */
  private handedOffSincePoll = false;
  private leasesOut = 0;
  private leasesAnswered: (() => void) | undefined;

  /** Something may have come due that no hand-off brought. */
  announce(): void {
    this.news++;
  }

  /** The poll (or a retry's timer): rows of other processes may be due, and are claimed as slots free up until a row is handed off again. */
  polled(): void {
    this.handedOffSincePoll = false;
  }

  /** Rows are handed off and nothing else can be due: a claim would come back empty. */
  claimNeedless(): boolean {
    return this.lastClaimShort && this.newsCovered === this.news && this.handedOffSincePoll;
  }

  /**
   * News no claim under way will see, while rows are handed off: to be claimed at once, even past
   * the rows ahead (`room` false once twice as many are held), so hand-offs pass it during one
   * claim at most. A store that takes no lease (MySQL, memory, most custom ones) hands nothing
   * off, and its worker claims exactly as it would without hand-offs.
   */
  newsWaiting(room: boolean): boolean {
    return this.lastClaimShort && this.handedOffSincePoll && this.newsClaimed !== this.news && room;
  }

  /** A claim is made; pass what it returns to claimed(). */
  claiming(): number {
    this.newsClaimed = this.news;
    return this.news;
  }

  /**
   * A claim came back: `short` when it brought fewer rows than asked and the store said nothing of
   * panels left unvisited, in a claim no back-off or probe limited (those say nothing of a backlog).
   */
  claimed(newsBefore: number, short: boolean): void {
    this.lastClaimShort = short;
    if (short) this.newsCovered = Math.max(this.newsCovered, newsBefore);
  }

  /** Whether hand-offs may be offered now (the worker checks its room). */
  open(): boolean {
    return this.lastClaimShort;
  }

  get outstanding(): number {
    return this.leasesOut;
  }

  leased(): void {
    this.leasesOut++;
  }

  /** A lease's enqueue ended; `handedOff`: with its row now held by the worker. */
  answered(handedOff: boolean): void {
    this.leasesOut--;
    if (handedOff) this.handedOffSincePoll = true;
    if (this.leasesOut === 0) this.leasesAnswered?.();
  }

  /** Resolves once every lease given out is answered, or after LEASES_WAIT_MS. */
  async settled(): Promise<void> {
    if (this.leasesOut === 0) return;
    let waited: NodeJS.Timeout | undefined;
    await new Promise<void>((resolve) => {
      this.leasesAnswered = resolve;
      waited = setTimeout(resolve, LEASES_WAIT_MS);
    });
    clearTimeout(waited);
  }
}
