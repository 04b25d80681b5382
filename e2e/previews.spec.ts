import { deflateSync } from 'node:zlib';
import type { Page } from '@playwright/test';
import { getKey, sha256 } from './demo.js';
import { expect, openDemo, test } from './fixtures.js';
import { sealInNode } from './sealing.js';

/**
 * Previews in the page: an image is decoded and shown, a PDF is handed to the browser's viewer in a
 * frame (the same bytes), text is shown as text. Files arrive by drag and drop here, as a person
 * would drop them on the page.
 */

const BOB = 'bob@example.com';

/** A small RGB PNG: a gradient `width` × `height`. */
function png(width: number, height: number): Buffer {
  const crcTable = Array.from({ length: 256 }, (_, n) => {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
    return c >>> 0;
  });
  const crc = (bytes: Buffer) => {
    let c = 0xffffffff;
    for (const b of bytes) c = crcTable[(c ^ b) & 0xff]! ^ (c >>> 8);
    return (c ^ 0xffffffff) >>> 0;
  };
  const chunk = (type: string, data: Buffer) => {
    const body = Buffer.concat([Buffer.from(type, 'ascii'), data]);
    const out = Buffer.alloc(8 + data.length + 4);
    out.writeUInt32BE(data.length, 0);
    body.copy(out, 4);
    out.writeUInt32BE(crc(body), 8 + data.length);
    return out;
  };
  const header = Buffer.alloc(13);
  header.writeUInt32BE(width, 0);
  header.writeUInt32BE(height, 4);
  header.set([8, 2, 0, 0, 0], 8);
  const rows = Buffer.alloc(height * (1 + width * 3));
  for (let y = 0; y < height; y++) {
    for (let x = 0; x < width; x++)
      rows.set([(x * 255) / width, (y * 255) / height, 128], y * (1 + width * 3) + 1 + x * 3);
  }
  return Buffer.concat([
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    chunk('IHDR', header),
    chunk('IDAT', deflateSync(rows)),
    chunk('IEND', Buffer.alloc(0)),
  ]);
}

/** Drops a file on the drop zone, the way a drag from the desktop arrives. */
async function dropFile(page: Page, name: string, bytes: Uint8Array): Promise<void> {
  const transfer = await page.evaluateHandle(
    ([fileName, base64]) => {
      const data = Uint8Array.from(atob(base64), (c) => c.charCodeAt(0));
      const dt = new DataTransfer();
      dt.items.add(new File([data], fileName, { type: 'application/octet-stream' }));
      return dt;
    },
    [name, Buffer.from(bytes).toString('base64')] as const,
  );
  await page.dispatchEvent('#dropzone', 'dragover', { dataTransfer: transfer });
  await expect(page.locator('#dropzone')).toHaveClass(/over/);
  await page.dispatchEvent('#dropzone', 'drop', { dataTransfer: transfer });
}

test('an image is decoded and shown; a PDF goes to a frame with the same bytes', async ({ page, context, stack }) => {
  const image = png(48, 32);
  await openDemo(page, stack, 'decrypt');
  await dropFile(page, 'chart.png.enc', await sealInNode(stack, [BOB], 'alice@example.org', image));
  await expect(page.locator('#file-info')).toBeVisible();
  await getKey(page, context, stack, { remember: true });
  await page.getByRole('button', { name: 'Preview' }).click();
  const img = page.getByRole('img', { name: 'Preview of chart.png' });
  await expect(img).toBeVisible();
  expect(
    await img.evaluate((el: HTMLImageElement) => el.decode().then(() => [el.naturalWidth, el.naturalHeight])),
  ).toEqual([48, 32]);

  const pdf = Buffer.from('%PDF-1.4\n1 0 obj << /Type /Catalog >> endobj\ntrailer << /Root 1 0 R >>\n%%EOF\n');
  await dropFile(page, 'terms.pdf.enc', await sealInNode(stack, [BOB], 'alice@example.org', pdf));
  await getKey(page, context, stack, { remember: true, expectScan: false });
  await page.getByRole('button', { name: 'Preview' }).click();
  const frame = page.locator('iframe[title="Preview of terms.pdf"]');
  await expect(frame).toBeAttached();
  const shown = await frame.evaluate(async (el: HTMLIFrameElement) => {
    const blob = await (await fetch(el.src)).blob();
    return { type: blob.type, bytes: Array.from(new Uint8Array(await blob.arrayBuffer())) };
  });
  expect(shown.type).toBe('application/pdf');
  expect(sha256(Uint8Array.from(shown.bytes))).toBe(sha256(pdf));
  await expect(page.locator('#verified')).toContainText('Decrypted terms.pdf for preview (not saved).');
});
