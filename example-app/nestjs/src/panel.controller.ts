import { Body, Controller, Get, HttpCode, Inject, Post, Render, UnprocessableEntityException } from '@nestjs/common';
import { InvalidReleaseError, type LicenseLocals, type Branding as PanelBranding, type Release, type ReleaseOutbox } from 'panel-license-guard';
import { Branding, License } from './license/branding.decorator';
import { RELEASE_OUTBOX } from './license/license.tokens';

@Controller()
export class PanelController {
  constructor(@Inject(RELEASE_OUTBOX) private readonly outbox: ReleaseOutbox) {}

  // Express passes res.locals (branding, license) to every view: the page only adds its own data.
  @Get()
  @Render('dashboard')
  async dashboard() {
    return { stats: await this.outbox.stats() };
  }

  @Get('api/status')
  status(@Branding() branding: PanelBranding, @License() license: LicenseLocals) {
    return { ok: true, panel: branding.name, color: branding.color, license: license.state, daysLeft: license.daysLeft };
  }

  // Stored durably before the artist hears "queued"; the outbox's worker delivers it to the mother.
  @Post('api/uploads')
  @HttpCode(202)
  async upload(@Body() body: Release) {
    try {
      const { id, state } = await this.outbox.enqueue(body);
      return { ok: true, id, state };
    } catch (error) {
      // enqueue() validates first and names the bad field; nothing was stored.
      if (error instanceof InvalidReleaseError) throw new UnprocessableEntityException({ ok: false, field: error.field, message: error.message });
      throw error;
    }
  }
}
