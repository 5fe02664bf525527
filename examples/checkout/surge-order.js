// surge-order.js: buying one order from surge's gateway, as the API contract
// asks (docs/API.md, the README's "Integrating a checkout"), with no page in it. checkout.js is the
// page around it. Plain JavaScript, no dependency: window.SurgeOrder.
//
//   const r = await SurgeOrder.buy({ api, sku, qty, customer, token, deadlineMs, onProgress });
//   r.outcome: 'invoiced' | 'rejected' | 'sold_out' | 'error' | 'unknown'
//
// token is the customer's token from the shop, when the gateway requires
// one (SURGE_CUSTOMER_JWT_*): it goes as "Authorization: Bearer" on every
// request, and the body carries no customer_id (the token names the
// customer). A 401 means the buyer must sign in again; nothing was taken.
//
// One fresh Idempotency-Key per purchase; the same key again after 503
// (unavailable or outcome_unknown), 429 or a network error, once
// Retry-After has passed; on 202, poll the order until invoiced or rejected.
'use strict';

window.SurgeOrder = (function () {
  const POLL_MS = 500; // polling an accepted order
  const SLOW_POLL_MS = 5000; // past the deadline: an accepted order still settles
  const REQUEST_TIMEOUT_MS = 15000; // one request; past it, retry the same key
  const DEFAULT_RETRY_MS = 1000; // a 503/429 without Retry-After, or a network error

  const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

  // uuid: randomUUID needs a secure context (https, or http on localhost);
  // getRandomValues works everywhere.
  function uuid() {
    if (crypto.randomUUID) return crypto.randomUUID();
    const b = crypto.getRandomValues(new Uint8Array(16));
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    const h = Array.from(b, (x) => x.toString(16).padStart(2, '0')).join('');
    return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
  }

  // timedFetch is fetch with a timeout; a timeout rejects like a network
  // error. No cookies: the API does not use them.
  async function timedFetch(url, init) {
    const ctl = new AbortController();
    const timer = setTimeout(() => ctl.abort(), REQUEST_TIMEOUT_MS);
    try {
      return await fetch(url, { ...init, signal: ctl.signal, credentials: 'omit' });
    } finally {
      clearTimeout(timer);
    }
  }

  async function readJSON(res) {
    try {
      return await res.json();
    } catch (e) {
      return null;
    }
  }

  function errorCode(data) {
    return (data && data.error && data.error.code) || '';
  }

  // describe is an error answer in words: the gateway's message and code.
  function describe(res, data) {
    const msg = (data && data.error && data.error.message) || res.statusText || 'unexpected answer';
    return `${msg} (${res.status}${errorCode(data) ? ' ' + errorCode(data) : ''})`;
  }

  // auth is the Authorization header for token, none without one.
  const auth = (token) => (token ? { Authorization: `Bearer ${token}` } : {});

  // getJSON GETs url (with the customer's token, when given): {res, data};
  // rejects on a network error.
  async function getJSON(url, token) {
    const res = await timedFetch(url, { cache: 'no-store', headers: auth(token) });
    return { res, data: await readJSON(res) };
  }

  // retryAfterMs reads Retry-After (seconds or an HTTP date; the gateway's
  // CORS exposes it), default 1 s, plus a little jitter so that buyers
  // refused together do not all come back in the same instant.
  function retryAfterMs(res) {
    let ms = DEFAULT_RETRY_MS;
    const h = res && res.headers.get('Retry-After');
    if (h && /^\d+$/.test(h.trim())) ms = 1000 * Number(h.trim());
    else if (h && !Number.isNaN(Date.parse(h))) ms = Math.max(0, Date.parse(h) - Date.now());
    return Math.min(ms, 30000) + Math.floor(Math.random() * 250);
  }

  // peek reads an order once: its view, or null (not found, not reachable).
  async function peek(url, token) {
    try {
      const { res, data } = await getJSON(url, token);
      return res.ok ? data : null;
    } catch (e) {
      return null;
    }
  }

  const isFinal = (v) => v && (v.status === 'invoiced' || v.status === 'rejected');

  function settled(v, attempts) {
    return {
      outcome: v.status, orderId: v.order_id, invoiceId: v.invoice_id, reason: v.reason,
      sku: v.sku, qty: v.qty, attempts,
    };
  }

  const RETRYING = {
    unreachable: 'Cannot reach the shop',
    busy: 'The shop is busy',
    limited: 'Too many requests',
    unknown: 'Confirming your order',
  };

  // buy places one order and follows it to its end. Retries reuse the key,
  // so the gateway names the same order every time and never takes it
  // twice. onProgress(text, {attempts, orderId}) tells what it is doing.
  async function buy({ api, sku, qty, customer, token = '', deadlineMs = 60000, onProgress = () => {} }) {
    api = api.replace(/\/+$/, '');
    const orderURL = (res, id) => {
      const loc = res && res.headers.get('Location'); // "/v1/orders/{id}" on 202
      return loc ? new URL(loc, api + '/').href : `${api}/v1/orders/${encodeURIComponent(id)}`;
    };
    const key = uuid();
    const body = JSON.stringify(token ? { sku, qty } : { sku, qty, customer_id: customer });
    const deadline = Date.now() + deadlineMs;
    let maybeTaken = ''; // an order id from outcome_unknown
    let met = ''; // what the latest attempt met: unreachable, busy, limited or unknown
    for (let attempts = 1; ; attempts++) {
      onProgress(attempts === 1 ? 'Placing your order…' : `Still trying… (attempt ${attempts})`,
        { attempts, orderId: maybeTaken });
      let res = null;
      let data = null;
      try {
        res = await timedFetch(`${api}/v1/orders`, {
          method: 'POST',
          headers: { 'Content-Type': 'application/json', 'Idempotency-Key': key, ...auth(token) },
          body,
        });
        data = await readJSON(res);
      } catch (e) {
        met = 'unreachable'; // offline, refused by CORS, or timed out
      }
      if (res && res.status === 202) {
        const id = (data && data.order_id) || '';
        return follow(orderURL(res, id), id, token, attempts, deadlineMs, onProgress);
      }
      const code = errorCode(data);
      if (res && res.status === 401) {
        return { outcome: 'error', message: 'your sign-in has expired or is not valid: sign in again',
          notTaken: true, signIn: true, attempts };
      }
      if (res && res.status === 409 && code === 'sold_out') return { outcome: 'sold_out', attempts };
      if (res && res.status !== 503 && res.status !== 429) {
        return { outcome: 'error', message: describe(res, data), notTaken: true, attempts };
      }
      if (res) met = code === 'outcome_unknown' ? 'unknown' : res.status === 429 ? 'limited' : 'busy';
      if (met === 'unknown' && data.order_id) {
        maybeTaken = data.order_id;
        const v = await peek(orderURL(null, maybeTaken), token);
        if (isFinal(v)) return settled(v, attempts);
      }
      const wait = retryAfterMs(res);
      if (Date.now() + wait > deadline) return giveUp(met, maybeTaken, attempts);
      onProgress(`${RETRYING[met]}: retrying… (attempt ${attempts + 1} in ${Math.max(1, Math.round(wait / 1000))} s)`,
        { attempts, orderId: maybeTaken });
      await sleep(wait);
    }
  }

  // giveUp tells the truth at the deadline. The latest answer decides:
  // 503 unavailable and 429 say the order was not taken (the gateway never
  // says so of a key that may name a taken order); outcome_unknown says it
  // may have been; with no answer at all nobody can be sure.
  function giveUp(met, maybeTaken, attempts) {
    if (met === 'unknown' || (met === 'unreachable' && maybeTaken)) {
      return { outcome: 'unknown', orderId: maybeTaken, attempts };
    }
    if (met === 'unreachable') {
      return { outcome: 'error', message: 'the shop could not be reached', notTaken: false, attempts };
    }
    const message = met === 'limited' ? 'too many requests' : 'the shop is busy';
    return { outcome: 'error', message, notTaken: true, attempts };
  }

  // follow polls an accepted order until it is invoiced or rejected. It
  // will settle, so polling slows down past the deadline but goes on.
  async function follow(url, id, token, attempts, deadlineMs, onProgress) {
    onProgress('Order accepted: waiting for the invoice…', { attempts, orderId: id });
    const slowAfter = Date.now() + deadlineMs;
    for (;;) {
      const v = await peek(url, token);
      if (isFinal(v)) return settled(v, attempts);
      await sleep(Date.now() < slowAfter ? POLL_MS : SLOW_POLL_MS);
    }
  }

  return { buy, getJSON, describe, uuid };
})();
