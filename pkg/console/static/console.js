// surge operations console: live figures by polling, bulk selection.
// No framework; values are written with textContent only.
(function () {
  'use strict';

  function poll(url, every, apply, live) {
    var busy = false;
    function tick() {
      if (busy || document.hidden) return;
      busy = true;
      fetch(url, { credentials: 'same-origin', headers: { Accept: 'application/json' } })
        .then(function (r) {
          if (r.status === 401) { window.location = '/console/login?next=' + encodeURIComponent(location.pathname + location.search); }
          if (!r.ok) throw new Error(r.status);
          return r.json();
        })
        .then(function (d) { apply(d); live.className = 'live on'; live.textContent = 'live · ' + new Date().toLocaleTimeString(); })
        .catch(function () { live.className = 'live stale'; live.textContent = 'not updating'; })
        .then(function () { busy = false; });
    }
    tick();
    setInterval(tick, every);
  }

  function fmt(k, v) {
    if (k === 'accepted_per_sec' || k === 'invoiced_per_sec') return Number(v).toFixed(1);
    return String(v);
  }

  // set writes row[k] into every [data-f=k] under el, flashing what moved.
  function set(el, row) {
    el.querySelectorAll('[data-f]').forEach(function (cell) {
      var k = cell.getAttribute('data-f');
      if (!(k in row)) return;
      if (k === 'state') {
        var b = cell.querySelector('.badge');
        if (b && b.textContent !== row.state) { b.textContent = row.state; b.className = 'badge ' + row.state; }
        return;
      }
      var text = fmt(k, row[k]);
      if (cell.textContent !== text) {
        cell.textContent = text;
        cell.classList.remove('changed'); void cell.offsetWidth; cell.classList.add('changed');
      }
    });
  }

  var board = document.getElementById('board');
  var live = document.getElementById('live');
  if (board && live) {
    var q = live.getAttribute('data-q') || '';
    poll('/console/api/board?q=' + encodeURIComponent(q), 1000, function (d) {
      var known = {};
      board.querySelectorAll('tbody tr[data-sku]').forEach(function (tr) { known[tr.getAttribute('data-sku')] = tr; });
      var fresh = false;
      (d.rows || []).forEach(function (row) {
        if (known[row.sku]) { set(known[row.sku], row); } else { fresh = true; }
      });
      // A SKU loaded meanwhile: the page shows it on its next load.
      if (fresh && !document.querySelector('tbody tr[data-sku] td.changed')) { live.textContent += ' · new SKUs: reload'; }
    }, live);
  }

  var skuLive = document.getElementById('sku-live');
  if (skuLive) {
    var sku = skuLive.getAttribute('data-sku');
    poll('/console/api/skus/' + encodeURIComponent(sku), 1000, function (row) { set(document, row); }, skuLive);
  }

  var all = document.getElementById('select-all');
  if (all) {
    all.addEventListener('change', function () {
      document.querySelectorAll('input.pick').forEach(function (c) { c.checked = all.checked; });
    });
  }
})();
