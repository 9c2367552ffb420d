/** An error a client caused or may see; anything else becomes a 500 that echoes no internals. */
export class HttpError extends Error {
  constructor(
    readonly statusCode: number,
    readonly code: string,
    message: string,
    readonly errors?: { field: string; message: string }[],
    /** More the client needs to act on the error (what to do instead), added to the body as it is. */
    readonly details?: Readonly<Record<string, unknown>>,
  ) {
    super(message);
  }
}

export const badRequest = (message: string, errors?: { field: string; message: string }[], code = 'invalid_request') => new HttpError(400, code, message, errors);
export const unauthorized = (message: string, code = 'unauthorized') => new HttpError(401, code, message);
export const forbidden = (message: string, code = 'forbidden') => new HttpError(403, code, message);
export const notFound = (what: string, code = 'not_found') => new HttpError(404, code, `${what} not found`);
export const gone = (message: string, code = 'gone') => new HttpError(410, code, message);
export const conflict = (message: string, code = 'conflict') => new HttpError(409, code, message);
