/**
 * A signed-in member's background traffic, as the hosted product's admin dashboard sends it
 * (dashboard-client-facts.md 0.8): the polls every page runs (dashboardPolls), and the soak's
 * driver of them (dashboardTimetable). The capacity bench (capacity.ts) runs the same polls for
 * thousands of members from one scheduler, each poll of each member at a random phase.
 *
 * The polls:
 *  - every 60 s: the unread mentions;
 *  - every 60 s, for each brand: its email connections (the broken-connection banner);
 *  - every 120 s, for each brand: its 20 newest tickets, and the comments of each ticket whose
 *    commentCount grew since the brand's last poll;
 *  - every 10 s, while a ticket page is open: the ticket and its comments.
 */
import { timetable, type Client } from './open-loop.js';

/** A GET of the dashboard at its slot `due`; `read` picks what the poll needs of the body (null: nothing). */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type DashboardGet = (due: number, route: string, read: ((json: any) => unknown) | null) => Promise<any>;

/** One of the dashboard's recurring requests: what it sends at each of its slots, `everyMs` apart. */
export interface Poll {
  everyMs: number;
  fire(due: number): void;
}

export interface OpenTicket {
  brandId: string;
  id: string;
}

/** A brand list's tickets as the poll compares them: [id, commentCount]. */
type CommentCounts = [string, number][];

/** The polls of one member's dashboard over `brandIds`; `openTicket`: the ticket page open now, if any. */
export function dashboardPolls(get: DashboardGet, brandIds: readonly string[], openTicket: () => OpenTicket | undefined): Poll[] {
  const lastCounts = new Map<string, CommentCounts>();
  const pollBrand = async (due: number, brandId: string) => {
    const counts: CommentCounts | undefined = await get(due, `/v1/brands/${brandId}/tickets?limit=20`, (page: { data: { id: string; commentCount: number }[] }) =>
      page.data.map((t) => [t.id, t.commentCount]),
    );
    if (!counts) return;
    const before = lastCounts.get(brandId);
    lastCounts.set(brandId, counts);
    if (!before) return;
    const seen = new Map(before);
    // Not in its slot: the dashboard asks as soon as it sees the count grow.
    for (const [id, count] of counts) if (count > (seen.get(id) ?? count)) void get(performance.now(), `/v1/brands/${brandId}/tickets/${id}/comments`, null);
  };
  return [
    { everyMs: 60_000, fire: (due) => void get(due, '/v1/auth/mentions/unread', null) },
    { everyMs: 60_000, fire: (due) => brandIds.forEach((b) => void get(due, `/v1/brands/${b}/email-connections`, null)) },
    { everyMs: 120_000, fire: (due) => brandIds.forEach((b) => void pollBrand(due, b)) },
    {
      everyMs: 10_000,
      fire: (due) => {
        const open = openTicket();
        if (!open) return;
        void get(due, `/v1/brands/${open.brandId}/tickets/${open.id}`, null);
        void get(due, `/v1/brands/${open.brandId}/tickets/${open.id}/comments`, null);
      },
    },
  ];
}

const TICK_MS = 10_000;

/**
 * The soak's dashboard: one member on a 10 s timetable from t0, every poll in its first slot.
 * Besides dashboardPolls: once, on boot, the session, the profile, the organizations; every 5
 * minutes the brands (the global notifier's staleTime); every 60 s the sidebar's tickets assigned
 * to the member and the ticket stats (read again as their 60 s staleTime runs out: the member
 * stays on /dashboard), and the member opens the newest ticket of the sidebar.
 */
export async function dashboardTimetable(
  client: Client,
  t0: number,
  seconds: number,
  session: Record<string, string>,
  memberId: string,
  brandIds: readonly string[],
): Promise<void> {
  const get: DashboardGet = (due, route, read) => client.send('dashboard', due, 'GET', route, session, undefined, { read });
  let open: OpenTicket | undefined;
  const polls: Poll[] = [
    ...dashboardPolls(get, brandIds, () => open),
    { everyMs: 300_000, fire: (due) => void get(due, '/v1/brands', null) },
    {
      everyMs: 60_000,
      fire: (due) => {
        void get(due, '/v1/tickets/stats', null);
        void get(due, `/v1/tickets?assigneeId=${memberId}&status=active&limit=100`, (page: { data: OpenTicket[] }) => page.data[0]).then((newest?: OpenTicket) => {
          if (newest) open = { brandId: newest.brandId, id: newest.id };
        });
      },
    },
  ];
  await timetable(t0, TICK_MS, Math.ceil((seconds * 1000) / TICK_MS), (tick, due) => {
    if (tick === 0) for (const route of ['/v1/auth/session', '/v1/auth/profile', '/v1/auth/organizations']) void get(due, route, null);
    for (const poll of polls) if ((tick * TICK_MS) % poll.everyMs === 0) poll.fire(due);
  });
}
