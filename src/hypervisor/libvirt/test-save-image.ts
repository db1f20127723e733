/**
 * The save image of libvirt's test driver (what virDomainSave writes for a `test:///` domain):
 * the 15 bytes `TestGuestMagic\0`, the length of the domain XML as a 32-bit little-endian integer,
 * then the XML. virDomainRestore defines the domain from that XML.
 *
 * A checkpoint is restored with a fresh identity (spec 4.10): a new uuid and instance id. libvirt's
 * API for that (virDomainRestoreFlags with an alternative XML, or virDomainSaveImageDefineXML) is
 * not in the binding sandboxd uses, so for the test driver the image's XML is rewritten here —
 * the same edit those calls make. qemu save images are not rewritten (README "Checkpoints").
 */

const MAGIC = Buffer.from('TestGuestMagic\0', 'latin1');
const HEADER_BYTES = MAGIC.length + 4;
/** Bound of the XML we accept from an image (a test domain's XML is a few KiB). */
const MAX_XML_BYTES = 1024 * 1024;

export function isTestSaveImage(image: Uint8Array): boolean {
  return image.byteLength >= HEADER_BYTES && Buffer.from(image.buffer, image.byteOffset, MAGIC.length).equals(MAGIC);
}

/** The domain XML of a test-driver save image; throws on anything else. */
export function testSaveImageXml(image: Uint8Array): string {
  if (!isTestSaveImage(image)) throw new Error('not a libvirt test-driver save image');
  const buf = Buffer.from(image.buffer, image.byteOffset, image.byteLength);
  const len = buf.readInt32LE(MAGIC.length);
  if (len <= 0 || len > MAX_XML_BYTES || HEADER_BYTES + len > buf.length) throw new Error('test-driver save image: bad XML length');
  return buf.subarray(HEADER_BYTES, HEADER_BYTES + len).toString('utf8');
}

/** A test-driver save image holding `xml`. */
export function testSaveImage(xml: string): Buffer {
  const body = Buffer.from(xml, 'utf8');
  const header = Buffer.alloc(HEADER_BYTES);
  MAGIC.copy(header);
  header.writeInt32LE(body.length, MAGIC.length);
  return Buffer.concat([header, body]);
}

/**
 * The XML with a new uuid and, in sandboxd's metadata, a new instance id (both must be present:
 * an image without them was not made by sandboxd and is refused).
 */
export function withFreshIdentity(xml: string, uuid: string, instanceId: string): string {
  const uuidRe = /<uuid>[^<]*<\/uuid>/;
  const instRe = /(<([A-Za-z0-9_-]+):instance-id>)[^<]*(<\/\2:instance-id>)/;
  if (!uuidRe.test(xml) || !instRe.test(xml)) throw new Error('the saved domain has no uuid or no sandboxd instance id');
  return xml.replace(uuidRe, `<uuid>${uuid}</uuid>`).replace(instRe, `$1${instanceId}$3`);
}

/**
 * The XML with a new instance id in sandboxd's metadata, the uuid kept: a qemu save image is
 * restored with an edited XML that libvirt checks for ABI stability, and the uuid is part of the
 * guest's ABI (its SMBIOS system uuid), so libvirt refuses another one.
 */
export function withFreshInstanceId(xml: string, instanceId: string): string {
  const instRe = /(<([A-Za-z0-9_-]+):instance-id>)[^<]*(<\/\2:instance-id>)/;
  if (!instRe.test(xml)) throw new Error('the saved domain has no sandboxd instance id');
  return xml.replace(instRe, `$1${instanceId}$3`);
}
