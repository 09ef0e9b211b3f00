/**
 * Width and height of an image in a base64 data URL, read from its header: PNG (IHDR), GIF (logical screen), WebP
 * (VP8, VP8L, VP8X) and JPEG (the first SOFn marker). Only the start of the data is decoded (at most
 * `MAX_SCAN_BYTES`, enough for JPEG files whose EXIF block comes before the frame header); anything unreadable is
 * undefined, and the caller falls back to its estimate. Nothing is ever fetched.
 */

export interface ImageSize {
  width: number
  height: number
}

const MAX_SCAN_BYTES = 256 * 1024

export function imageSize(dataUrl: string): ImageSize | undefined {
  const comma = dataUrl.indexOf(',')
  if (comma === -1 || comma > 256 || !dataUrl.slice(0, comma).endsWith(';base64')) return undefined
  // 4 base64 characters are 3 bytes.
  const b = Buffer.from(dataUrl.slice(comma + 1, comma + 1 + Math.ceil(MAX_SCAN_BYTES / 3) * 4), 'base64')
  return png(b) ?? gif(b) ?? webp(b) ?? jpeg(b)
}

function png(b: Buffer): ImageSize | undefined {
  if (b.length < 24 || b.readUInt32BE(0) !== 0x89504e47 || b.toString('latin1', 12, 16) !== 'IHDR') return undefined
  return { width: b.readUInt32BE(16), height: b.readUInt32BE(20) }
}

function gif(b: Buffer): ImageSize | undefined {
  if (b.length < 10 || b.toString('latin1', 0, 4) !== 'GIF8') return undefined
  return { width: b.readUInt16LE(6), height: b.readUInt16LE(8) }
}

function webp(b: Buffer): ImageSize | undefined {
  if (b.length < 30 || b.toString('latin1', 0, 4) !== 'RIFF' || b.toString('latin1', 8, 12) !== 'WEBP') return undefined
  const kind = b.toString('latin1', 12, 16)
  if (kind === 'VP8 ') return { width: b.readUInt16LE(26) & 0x3fff, height: b.readUInt16LE(28) & 0x3fff }
  if (kind === 'VP8L') {
    const bits = b.readUInt32LE(21)
    return { width: (bits & 0x3fff) + 1, height: ((bits >> 14) & 0x3fff) + 1 }
  }
  if (kind === 'VP8X') return { width: b.readUIntLE(24, 3) + 1, height: b.readUIntLE(27, 3) + 1 }
  return undefined
}

function jpeg(b: Buffer): ImageSize | undefined {
  if (b.length < 4 || b[0] !== 0xff || b[1] !== 0xd8) return undefined
  let i = 2
  while (i + 9 < b.length) {
    if (b[i] !== 0xff) return undefined
    const marker = b[i + 1] as number
    // Fill bytes and markers without a length.
    if (marker === 0xff) {
      i++
      continue
    }
    if (marker === 0xd8 || (marker >= 0xd0 && marker <= 0xd7) || marker === 0x01) {
      i += 2
      continue
    }
    // SOF0–SOF15 except DHT (C4), JPG (C8) and DAC (CC) carry the frame size.
    if (marker >= 0xc0 && marker <= 0xcf && marker !== 0xc4 && marker !== 0xc8 && marker !== 0xcc) {
      return { height: b.readUInt16BE(i + 5), width: b.readUInt16BE(i + 7) }
    }
    i += 2 + b.readUInt16BE(i + 2)
  }
  return undefined
}
