// @Branding() and @License(): what the guard put in res.locals, as typed controller parameters.
import 'panel-license-guard/express-locals'; // types res.locals.branding and res.locals.license
import { createParamDecorator, type ExecutionContext } from '@nestjs/common';
import type { Response } from 'express';
import type { LicenseLocals, Branding as PanelBranding } from 'panel-license-guard';

function localsOf(ctx: ExecutionContext): Response['locals'] {
  const { locals } = ctx.switchToHttp().getResponse<Response>();
  // Set on every request the guard sees; missing only on a route excluded from it.
  if (!locals.branding) throw new Error('@Branding()/@License() used on a route the license guard does not run for.');
  return locals;
}

/** The panel's cleaned branding. Annotate the parameter `PanelBranding`: Nest does not check it. */
export const Branding = createParamDecorator((_data: unknown, ctx: ExecutionContext): PanelBranding => localsOf(ctx).branding);

/** The license as templates see it (state, daysLeft, …). */
export const License = createParamDecorator((_data: unknown, ctx: ExecutionContext): LicenseLocals => localsOf(ctx).license);
