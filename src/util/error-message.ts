/**
 * The one way sandboxd turns a caught value into text for a log field, an error message or a
 * status line. A `catch` binds `unknown`: usually an Error, but a rejected promise or a worker can
 * hand over anything, even a value String() cannot convert.
 */

/** `err.message` for an Error (SvcError included), otherwise `String(err)`; never throws. */
export function errorMessage(err: unknown): string {
  if (err instanceof Error) return err.message;
  try {
    return String(err);
  } catch {
    // an object without a prototype (Object.create(null)) or with a throwing toString
    return Object.prototype.toString.call(err);
  }
}
