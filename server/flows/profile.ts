import { sessionMemberId, type TenantCtx } from '../core/context.js';
import { notFound } from '../core/errors.js';
import * as attachments from '../domains/attachments/service.js';
import * as members from '../domains/members/service.js';
import * as profiles from '../domains/profiles/service.js';
import type { AvatarGrantView, AvatarUploadInput, ProfileView, UpdateProfileInput } from '../domains/profiles/schemas.js';

/**
 * The signed-in member's profile: the member (members) gives the display name's default, the
 * profile and avatar files are the profiles domain's, and an avatar file a change replaced is
 * removed from storage after its commit (attachments keeps the queue of files to remove; what this
 * misses, the dispatcher's purge removes).
 */

async function me(ctx: TenantCtx): Promise<profiles.Me> {
  const memberId = sessionMemberId(ctx);
  const member = await members.sessionMember(ctx, memberId);
  if (!member) throw notFound('Member');
  return { memberId, name: member.name };
}

async function removeReplacedFiles(ctx: TenantCtx, io: profiles.AvatarIo, removedFiles: string[]): Promise<void> {
  if (removedFiles.length) await attachments.removeQueuedFiles(ctx, io.storage, ctx.accountId, removedFiles).catch(() => undefined);
}

async function settled(ctx: TenantCtx, io: profiles.AvatarIo, change: Promise<profiles.Changed>): Promise<ProfileView> {
  const { profile, removedFiles } = await change;
  await removeReplacedFiles(ctx, io, removedFiles);
  return profile;
}

export async function getProfile(ctx: TenantCtx, io: profiles.AvatarIo): Promise<ProfileView> {
  return profiles.get(ctx, io, await me(ctx));
}

export async function updateProfile(ctx: TenantCtx, io: profiles.AvatarIo, input: UpdateProfileInput): Promise<ProfileView> {
  return settled(ctx, io, profiles.update(ctx, io, await me(ctx), input));
}

export async function uploadAvatar(ctx: TenantCtx, io: profiles.AvatarIo, file: Parameters<typeof profiles.upload>[3]): Promise<ProfileView> {
  return settled(ctx, io, profiles.upload(ctx, io, await me(ctx), file));
}

export async function requestAvatarUpload(ctx: TenantCtx, io: profiles.AvatarIo, input: AvatarUploadInput): Promise<AvatarGrantView> {
  const { grant, removedFiles } = await profiles.requestUpload(ctx, io, await me(ctx), input);
  await removeReplacedFiles(ctx, io, removedFiles);
  return grant;
}

export async function confirmAvatar(ctx: TenantCtx, io: profiles.AvatarIo, storageKey?: string): Promise<ProfileView> {
  return settled(ctx, io, profiles.confirm(ctx, io, await me(ctx), storageKey));
}

export async function removeAvatar(ctx: TenantCtx, io: profiles.AvatarIo): Promise<ProfileView> {
  return settled(ctx, io, profiles.removeAvatar(ctx, io, await me(ctx)));
}
