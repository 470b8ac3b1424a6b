import { describe, expect, it } from 'vitest';
import { brandingFrom, safeColor } from '../../src/serve/branding.js';
import { escapeHtml } from '../../src/serve/html.js';
import { renderLockPage } from '../../src/serve/lock-page.js';
import { safeHttpUrl } from '../../src/text.js';

const defaults = { name: 'Panel', color: '#334155' };

describe('brandingFrom()', () => {
  it('keeps valid values', () => {
    expect(
      brandingFrom(
        {
          name: '  Rhythm Hub ',
          brand_color: '#FF5500',
          brand_logo_url: 'https://cdn.example/l.png',
          subdomain: 'rhythm',
          custom_domain: 'Panel.Rhythm.example',
        },
        defaults,
      ),
    ).toEqual({ name: 'Rhythm Hub', color: '#ff5500', logoUrl: 'https://cdn.example/l.png', subdomain: 'rhythm', customDomain: 'panel.rhythm.example' });
  });

  it('refuses colours that are not #rrggbb', () => {
    for (const attack of ['red', '#fff', '#ff5500; background:url(//evil)', '#ff550', '#gg5500', 'expression(alert(1))', '#ff5500\n', ' #ff5500']) {
      expect(safeColor(attack, '#334155')).toBe('#334155');
    }
  });

  it('refuses logo URLs that are not plain http(s)', () => {
    for (const attack of [
      'javascript:alert(1)',
      'JaVaScRiPt:alert(1)',
      ' javascript:alert(1)',
      ' https://cdn.example/l.png',
      'data:image/svg+xml,<svg onload=alert(1)>',
      'vbscript:x',
      '//evil.example/l.png',
      '/logo.png',
      'https://user:pass@cdn.example/l.png',
      `https://cdn.example/${'a'.repeat(3000)}`,
      'https://a;sandbox/x.png',
      "https://a'b/x.png",
    ]) {
      expect(safeHttpUrl(attack)).toBeNull();
    }
    expect(safeHttpUrl('HTTPS://cdn.example/l.png?x="><script>')).toBe('https://cdn.example/l.png?x=%22%3E%3Cscript%3E');
  });

  it('strips invisible characters, trims and caps the name', () => {
    const branding = brandingFrom({ name: `\u202eevil\u0000 ${'x'.repeat(200)}` }, defaults);
    expect(branding.name.startsWith('evil x')).toBe(true);
    expect([...branding.name]).toHaveLength(80);
    expect(brandingFrom({ name: ' \u200b ' }, defaults).name).toBe('Panel');
  });

  it('removes invisible characters by Unicode property', () => {
    const invisible: [string, string][] = [
      ['U+2060 word joiner', '\u2060'],
      ['U+061C Arabic letter mark', '\u061c'],
      ['U+00AD soft hyphen', '\u00ad'],
      ['U+3164 Hangul filler', '\u3164'],
      ['U+115F Hangul choseong filler', '\u115f'],
      ['U+FFA0 halfwidth Hangul filler', '\uffa0'],
      ['U+E0041 tag latin A', '\u{e0041}'],
      ['U+2028 line separator', '\u2028'],
      ['U+2029 paragraph separator', '\u2029'],
      ['U+200B zero-width space', '\u200b'],
      ['U+202E right-to-left override', '\u202e'],
      ['U+2066 left-to-right isolate', '\u2066'],
      ['U+FEFF byte order mark', '\ufeff'],
      ['U+180E Mongolian vowel separator', '\u180e'],
      ['U+0085 next line (C1)', '\u0085'],
      ['U+009B CSI (C1)', '\u009b'],
      ['U+E000 private use', '\ue000'],
      ['U+2800 braille blank', '\u2800'],
      ['U+034F combining grapheme joiner', '\u034f'],
      ['U+FE00 variation selector 1', '\ufe00'],
      ['U+E0100 variation selector 17', '\u{e0100}'],
      ['U+180B Mongolian free variation selector', '\u180b'],
      ['U+17B4 Khmer vowel inherent aq', '\u17b4'],
      ['U+2065 (unassigned, ignorable)', '\u2065'],
      ['U+FFF0 (unassigned, ignorable)', '\ufff0'],
      ['U+E0080 (unassigned tag)', '\u{e0080}'],
    ];
    for (const [what, char] of invisible) {
      expect(brandingFrom({ name: `Be${char}ats` }, defaults).name, what).toBe('Beats');
      expect(brandingFrom({ name: char }, defaults).name, what).toBe('Panel');
    }
    expect(brandingFrom({ name: 'Café 🎵 Ünïcode' }, defaults).name).toBe('Café 🎵 Ünïcode');
  });

  it('refuses hostnames with anything but labels', () => {
    expect(brandingFrom({ subdomain: 'a b', custom_domain: 'evil.example/<script>' }, defaults)).toMatchObject({ subdomain: null, customDomain: null });
  });
});

describe('renderLockPage()', () => {
  it('escapes every remote value', () => {
    const branding = brandingFrom({ name: '<img src=x onerror=alert(1)>', brand_logo_url: 'https://cdn.example/a.png?"onerror="alert(1)' }, defaults);
    const supportContact = { text: 'https://help.example/?a="><script>', href: 'https://help.example/?a=%22%3E%3Cscript%3E' };
    const html = renderLockPage({ branding, message: '</p><script>alert(1)</script>', supportContact, retryAfterSeconds: 300 });
    expect(html).not.toContain('<script>');
    expect(html).not.toContain('<img src=x');
    expect(html).toContain(escapeHtml('</p><script>alert(1)</script>'));
    expect(html).toContain('src="https://cdn.example/a.png?%22onerror=%22alert(1)"');
  });
});
