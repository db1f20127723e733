/**
 * libvirt connection URIs: what kind of host a URI names, and how to show it without secrets.
 */

/** The driver part of the scheme: `test`, `qemu`, `kvm`, ... (`qemu+ssh` → `qemu`). */
export function uriDriver(uri: string): string {
  const scheme = /^([a-z][a-z0-9+.-]*):/i.exec(uri)?.[1] ?? '';
  return (scheme.split('+')[0] ?? '').toLowerCase();
}

/** The transport part of the scheme (`qemu+ssh` → `ssh`), or '' for the default. */
export function uriTransport(uri: string): string {
  const scheme = /^([a-z][a-z0-9+.-]*):/i.exec(uri)?.[1] ?? '';
  const plus = scheme.indexOf('+');
  return plus < 0 ? '' : scheme.slice(plus + 1).toLowerCase();
}

/**
 * True when the URI opens libvirt's test driver inside this process (`test:///default`,
 * `test:///path/node.xml`): no daemon, so another process (virsh) cannot see its state.
 */
export function isInProcessTestUri(uri: string): boolean {
  return uriDriver(uri) === 'test' && uriTransport(uri) === '' && /^test:\/\/\//i.test(uri);
}

/** True for any test-driver URI (in-process or served by a daemon): domains are `type='test'`. */
export function isTestDriverUri(uri: string): boolean {
  return uriDriver(uri) === 'test';
}

const SECRET_PARAM = /key|pass|secret|token|pki|auth|cred/i;

/**
 * The URI with a user-info password removed and the values of secret-looking query parameters
 * (keyfile, pkipath, authfile, ...) replaced by `redacted`. Used in messages, health and events.
 */
export function redactUri(uri: string): string {
  let out = uri.replace(/^([a-z][a-z0-9+.-]*:\/\/)([^/@?#]*)@/i, (_m, scheme: string, userinfo: string) => {
    const colon = userinfo.indexOf(':');
    return `${scheme}${colon < 0 ? userinfo : userinfo.slice(0, colon)}@`;
  });
  const q = out.indexOf('?');
  if (q >= 0) {
    const params = out
      .slice(q + 1)
      .split('&')
      .map((kv) => {
        const eq = kv.indexOf('=');
        if (eq < 0) return kv;
        const key = kv.slice(0, eq);
        return SECRET_PARAM.test(key) ? `${key}=redacted` : kv;
      });
    out = `${out.slice(0, q)}?${params.join('&')}`;
  }
  return out;
}
