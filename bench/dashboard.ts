/**
 * The soak's dashboard: one signed-in member's background traffic, as the hosted product's admin
 * dashboard sends it (its polling and load profile), on a 10 s timetable:
 *  - once, on boot: the session, the profile, the organizations;
 *  - every 5 minutes: the brands (the global notifier's staleTime);
 *  - every 60 s: the unread mentions; the sidebar's tickets assigned to the member and the ticket
 *    stats (read again as their 60 s staleTime runs out: the member stays on /dashboard);
 *  - every 120 s, for each brand: its 20 newest tickets, and the comments of each ticket whose
 *    commentCount grew since the brand's last poll;
 *  - every 10 s: the open ticket and its comments (the ticket page); each minute the member opens
 *    the newest ticket of the sidebar.
 * The dashboard's per-brand email-connections poll is left out: ticketd has no mailbox connections.
 */
import { timetable, type Client } from './open-loop.js';

const TICK_MS = 10_000;

export async function dashboardTimetable(
  client: Client,
  t0: number,
  seconds: number,
  session: Record<string, string>,
  memberId: string,
  brandIds: readonly string[],
): Promise<void> {
  const get = (due: number, route: string) => client.send('dashboard', due, 'GET', route, session);
  let open: { brandId: string; id: string } | undefined;
  const commentCounts = new Map<string, Map<string, number>>();
  const pollBrand = async (due: number, brandId: string) => {
    const page = await get(due, `/v1/brands/${brandId}/tickets?limit=20`);
    if (!page) return;
    const before = commentCounts.get(brandId);
    const now = new Map<string, number>(page.data.map((t: { id: string; commentCount: number }) => [t.id, t.commentCount]));
    commentCounts.set(brandId, now);
    for (const [id, count] of now) if (count > (before?.get(id) ?? count)) void get(performance.now(), `/v1/brands/${brandId}/tickets/${id}/comments`);
  };
  await timetable(t0, TICK_MS, Math.ceil((seconds * 1000) / TICK_MS), (tick, due) => {
    if (tick === 0) for (const route of ['/v1/auth/session', '/v1/auth/profile', '/v1/auth/organizations']) void get(due, route);
    if (tick % 30 === 0) void get(due, '/v1/brands');
    if (tick % 6 === 0) {
      void get(due, '/v1/auth/mentions/unread');
      void get(due, '/v1/tickets/stats');
      void get(due, `/v1/tickets?assigneeId=${memberId}&status=active&limit=100`).then((page) => {
        const newest = page?.data[0] as { id: string; brandId: string } | undefined;
        if (newest) open = { brandId: newest.brandId, id: newest.id };
      });
    }
    if (tick % 12 === 0) for (const b of brandIds) void pollBrand(due, b);
    if (open) {
      void get(due, `/v1/brands/${open.brandId}/tickets/${open.id}`);
      void get(due, `/v1/brands/${open.brandId}/tickets/${open.id}/comments`);
    }
  });
}
