import { html, type SafeHtml } from '../html.js';
import { page } from './layout.js';

/** The key goes to the server once, in this post; the browser keeps only the session cookie. */
export function signInPage(input: { error?: string; notice?: string } = {}): SafeHtml {
  return page({
    title: 'Sign in', section: 'none',
    body: html`<section class="card narrow" aria-labelledby="sign-in-title">
      <h1 id="sign-in-title">Sign in to the console</h1>
      <p class="muted">Use your organisation's platform key (<code>agp_…</code>). A seller key (<code>loid-…</code>) signs in read-only.</p>
      ${input.notice ? html`<p class="notice" role="status">${input.notice}</p>` : ''}
      ${input.error ? html`<p class="alert" role="alert" id="sign-in-error">${input.error}</p>` : ''}
      <form method="post" action="/console/sign-in" class="stack">
        <label for="key">Platform key</label>
        <input id="key" name="key" type="password" autocomplete="off" spellcheck="false" required maxlength="200"${input.error ? html` aria-describedby="sign-in-error" aria-invalid="true"` : ''} autofocus>
        <button type="submit" class="button">Sign in</button>
      </form>
    </section>`,
  });
}
