import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { contentDisposition, contentTypeFor, downloadHeaders } from '../../../src/storage/content-type.js';

describe('contentTypeFor', () => {
  test('the documented table, case-insensitive, last extension wins', () => {
    const table: Array<[string, string]> = [
      ['notes.txt', 'text/plain; charset=utf-8'],
      ['run.log', 'text/plain; charset=utf-8'],
      ['README.MD', 'text/markdown; charset=utf-8'],
      ['data.json', 'application/json'],
      ['page.html', 'text/html; charset=utf-8'],
      ['a.png', 'image/png'],
      ['a.jpg', 'image/jpeg'],
      ['a.gif', 'image/gif'],
      ['a.svg', 'image/svg+xml'],
      ['a.pdf', 'application/pdf'],
      ['a.zip', 'application/zip'],
      ['a.tar', 'application/x-tar'],
      ['a.tar.gz', 'application/gzip'],
      ['fix.diff', 'text/x-diff; charset=utf-8'],
      ['fix.patch', 'text/x-diff; charset=utf-8'],
      ['binary', 'application/octet-stream'],
      ['.bashrc', 'application/octet-stream'],
      ['trailing.', 'application/octet-stream'],
      ['x.exe', 'application/octet-stream'],
      ['x.constructor', 'application/octet-stream'],
      ['x.__proto__', 'application/octet-stream'],
    ];
    for (const [name, type] of table) assert.equal(contentTypeFor(name), type, name);
  });
});

describe('contentDisposition', () => {
  test('always an attachment, with an ASCII fallback and the exact UTF-8 name', () => {
    assert.equal(contentDisposition('report.json'), `attachment; filename="report.json"; filename*=UTF-8''report.json`);
    assert.equal(contentDisposition('a"b;c.txt'), `attachment; filename="a_b_c.txt"; filename*=UTF-8''a%22b%3Bc.txt`);
    assert.equal(contentDisposition('résumé.pdf'), `attachment; filename="r_sum_.pdf"; filename*=UTF-8''r%C3%A9sum%C3%A9.pdf`);
    assert.equal(contentDisposition('dir/sub/file.txt'), `attachment; filename="file.txt"; filename*=UTF-8''file.txt`);
    assert.match(contentDisposition('.hidden'), /^attachment; filename="_hidden"/u);
  });

  test('property: the header value is one line of visible ASCII with one quoted string', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'binary', minLength: 1, maxLength: 300 }), (name) => {
        const v = contentDisposition(name);
        assert.match(v, /^attachment; filename="[A-Za-z0-9._-]*"; filename\*=UTF-8''[A-Za-z0-9!#$&+\-.^_`|~%]*$/u);
      }),
    );
  });

  test('download headers: no sniffing, no caching, sandboxed, with the length', () => {
    const h = downloadHeaders('x.svg', 12);
    assert.equal(h['content-length'], '12');
    assert.equal(h['x-content-type-options'], 'nosniff');
    assert.equal(h['cache-control'], 'no-store');
    assert.match(h['content-security-policy'] ?? '', /sandbox/u);
  });
});
