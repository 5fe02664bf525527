// checkout.js: the reference checkout page around surge-order.js. Plain
// JavaScript, no build step, no dependency. Settings come from the query
// string (README.md): api, sku, customer, qty, and optionally deadline
// (seconds of retrying, default 60) and currency (default USD). When the
// shop vouches for its customers, its page carries the signed-in
// customer's token in <meta name="surge-customer-token" content="...">:
// the checkout then buys as that token's customer.
'use strict';

(function () {
  const ID_PATTERN = /^[A-Za-z0-9._-]{1,64}$/;
  const CUSTOMER_KEY = 'surge-checkout.customer';
  const { buy, getJSON, describe, uuid } = window.SurgeOrder;
  const $ = (id) => document.getElementById(id);

  // shopToken is the customer's token the shop's page provides, '' when
  // it provides none.
  function shopToken() {
    const m = document.querySelector('meta[name="surge-customer-token"]');
    return ((m && m.content) || '').trim();
  }

  // tokenSubject is the customer a token names (its "sub"), for showing
  // only: the gateway verifies the token, the page cannot.
  function tokenSubject(token) {
    try {
      const part = token.split('.')[1].replace(/-/g, '+').replace(/_/g, '/');
      return String(JSON.parse(atob(part + '==='.slice((part.length + 3) % 4))).sub || '');
    } catch (e) {
      return '';
    }
  }

  function readSettings() {
    const q = new URLSearchParams(location.search);
    const deadline = Number(q.get('deadline'));
    const s = {
      api: (q.get('api') || '').replace(/\/+$/, ''),
      sku: q.get('sku') || '',
      customer: q.get('customer') || '',
      qty: q.get('qty') || '1',
      deadlineMs: 1000 * (deadline > 0 ? deadline : 60),
      currency: q.get('currency') || 'USD',
      token: shopToken(),
    };
    if (s.token) s.customer = tokenSubject(s.token);
    else if (!s.customer) { // one random customer per tab, kept across reloads
      s.customer = sessionStorage.getItem(CUSTOMER_KEY) || '';
      if (!ID_PATTERN.test(s.customer)) {
        s.customer = 'web-' + uuid().replace(/-/g, '').slice(0, 20);
        sessionStorage.setItem(CUSTOMER_KEY, s.customer);
      }
    }
    s.problems = [];
    if (!/^https?:\/\/[^/]/.test(s.api)) s.problems.push('"api" must be the gateway\'s base URL, e.g. http://127.0.0.1:8080');
    if (!ID_PATTERN.test(s.sku)) s.problems.push('"sku" must be 1-64 characters of A-Z a-z 0-9 . _ -');
    if (s.token && !s.customer) s.problems.push('the shop\'s customer token names no customer (sub)');
    else if (!ID_PATTERN.test(s.customer)) s.problems.push('"customer" must be 1-64 characters of A-Z a-z 0-9 . _ -');
    return s;
  }

  const cfg = readSettings();

  function formatPrice(cents) {
    try {
      return new Intl.NumberFormat(undefined, { style: 'currency', currency: cfg.currency }).format(cents / 100);
    } catch (e) {
      return (cents / 100).toFixed(2);
    }
  }

  function productFailed(text) {
    const box = $('product');
    box.dataset.state = 'error';
    if (!box.dataset.loaded) $('product-name').textContent = 'Product unavailable';
    $('product-error').textContent = `Could not load the product: ${text}.`;
    $('product-error').hidden = false;
  }

  // loadProduct shows the product and what is left of it.
  async function loadProduct() {
    let got;
    try {
      got = await getJSON(`${cfg.api}/v1/products/${encodeURIComponent(cfg.sku)}`);
    } catch (e) {
      return productFailed('the shop could not be reached');
    }
    const { res, data } = got;
    if (!res.ok) {
      if (res.status === 404) $('buy').disabled = true;
      return productFailed(describe(res, data));
    }
    const box = $('product');
    box.dataset.state = 'ready';
    box.dataset.loaded = 'true';
    $('product-error').hidden = true;
    $('product-name').textContent = data.name || data.sku;
    $('product-price').textContent = formatPrice(data.price_cents);
    $('product-left').textContent = data.available > 0 ? `${data.available} left` : 'Sold out';
  }

  function setStatus(text) {
    $('status').textContent = text;
  }

  function setBusy(busy) {
    $('buy').disabled = busy;
    $('buy-form').setAttribute('aria-busy', String(busy));
    $('buy').textContent = busy ? 'Buying…' : 'Buy';
  }

  // words turns an outcome into the sentence the buyer reads, and a detail.
  function words(r) {
    switch (r.outcome) {
      case 'invoiced':
        return [`Your order is confirmed (invoice #${r.invoiceId})`, `Order ${r.orderId}: ${r.qty} × ${r.sku}.`];
      case 'rejected': {
        const why = r.reason === 'sold_out_after_acceptance'
          ? 'the last units turned out to be gone after all'
          : (r.reason || 'it was rejected').replace(/_/g, ' ');
        return [`Your order could not be completed: ${why}.`, `Order ${r.orderId} was not invoiced; nothing was charged.`];
      }
      case 'sold_out':
        return ['Sold out', 'No unit was left for this order. Nothing was charged.'];
      case 'unknown':
        return [`We could not confirm your order yet (order ${r.orderId}).`,
          'It may still go through: check its status before buying again.'];
      default:
        if (r.signIn) {
          return [`Your order could not be completed: ${r.message}.`, 'Nothing was taken. Sign in again, then buy.'];
        }
        return [`Your order could not be completed: ${r.message}.`, r.notTaken
          ? 'Nothing was taken. Please try again in a moment.'
          : 'It was most likely not placed; check before buying again.'];
    }
  }

  // showResult fills #result; data-outcome is what tests and scripts read.
  function showResult(r) {
    const box = $('result');
    box.textContent = '';
    box.dataset.outcome = r.outcome;
    if (r.orderId) box.dataset.orderId = r.orderId;
    box.dataset.attempts = String(r.attempts || 0);
    for (const [cls, text] of [['result-text', words(r)[0]], ['result-detail', words(r)[1]]]) {
      const p = document.createElement('p');
      p.className = cls;
      p.textContent = text;
      box.appendChild(p);
    }
  }

  function clearResult() {
    const box = $('result');
    box.textContent = '';
    for (const k of ['outcome', 'orderId', 'attempts']) delete box.dataset[k];
  }

  async function onSubmit(ev) {
    ev.preventDefault();
    const input = $('qty');
    const qty = Number(input.value);
    if (!Number.isInteger(qty) || qty < 1 || qty > 1000) {
      input.setAttribute('aria-invalid', 'true');
      input.focus();
      return;
    }
    input.removeAttribute('aria-invalid');
    setBusy(true);
    clearResult();
    let r;
    try {
      r = await buy({
        api: cfg.api, sku: cfg.sku, qty, customer: cfg.customer, token: cfg.token, deadlineMs: cfg.deadlineMs,
        onProgress: (text, { attempts, orderId }) => {
          setStatus(text);
          $('result').dataset.attempts = String(attempts);
          if (orderId) $('result').dataset.orderId = orderId;
        },
      });
    } catch (e) {
      r = { outcome: 'error', message: e.message, notTaken: false };
    }
    setStatus('');
    showResult(r);
    setBusy(false);
    // The product view may lag a sale by a moment: after "sold out", say
    // so rather than show units the gateway has just refused.
    if (r.outcome === 'sold_out') $('product-left').textContent = 'Sold out';
    else loadProduct();
  }

  function init() {
    $('customer-id').textContent = cfg.customer;
    $('product-sku').textContent = cfg.sku || '–';
    $('qty').value = cfg.qty;
    if (cfg.problems.length) {
      $('product').dataset.state = 'error';
      $('product-name').textContent = 'This checkout is not set up';
      $('product-error').textContent = cfg.problems.join('; ') + '.';
      $('product-error').hidden = false;
      $('buy').disabled = true;
      return;
    }
    $('buy-form').addEventListener('submit', onSubmit);
    loadProduct();
  }

  init();
})();
