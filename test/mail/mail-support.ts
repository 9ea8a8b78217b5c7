import nodemailer from 'nodemailer';
import type { TestServer } from '../support/server.js';

/** Polls an assertion until it holds: delivery runs in a background job. */
export async function eventually(check: () => unknown | Promise<unknown>, timeoutMs = 15_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      await check();
      return;
    } catch (err) {
      if (Date.now() > deadline) throw err;
      await new Promise((r) => setTimeout(r, 50));
    }
  }
}

/** An SMTP client from outside, as any mail program would connect to the server's listener. */
export function smtpClient(server: TestServer) {
  return nodemailer.createTransport({ host: '127.0.0.1', port: server.smtpPort, secure: false, ignoreTLS: true, name: 'client.example' });
}
