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

  // cell builds a board cell: <td class=num data-f=k>.
  function cell(k, row) {
    var td = document.createElement('td');
    td.className = 'num';
    td.setAttribute('data-f', k);
    td.textContent = fmt(k, row[k]);
    return td;
  }

  // boardRow builds a board line for a SKU the page was not served with.
  function boardRow(row) {
    var tr = document.createElement('tr');
    tr.setAttribute('data-sku', row.sku);
    var name = document.createElement('td');
    var a = document.createElement('a');
    a.href = '/console/skus/' + encodeURIComponent(row.sku);
    a.textContent = row.sku;
    var sub = document.createElement('div');
    sub.className = 'muted small';
    sub.textContent = row.name;
    name.appendChild(a); name.appendChild(sub);
    tr.appendChild(name);
    var loaded = document.createElement('td');
    loaded.className = 'small';
    loaded.textContent = row.loaded_at;
    tr.appendChild(loaded);
    ['redis_stock', 'redis_avail', 'redis_reserved', 'redis_sold', 'mysql_stock', 'mysql_avail', 'mysql_sold',
      'accepted_per_sec', 'invoiced_per_sec'].forEach(function (k) { tr.appendChild(cell(k, row)); });
    var state = document.createElement('td');
    state.setAttribute('data-f', 'state');
    var badge = document.createElement('span');
    badge.className = 'badge ' + row.state;
    badge.textContent = row.state;
    state.appendChild(badge);
    tr.appendChild(state);
    return tr;
  }

  var board = document.getElementById('board');
  var live = document.getElementById('live');
  if (board && live) {
    var q = live.getAttribute('data-q') || '';
    var tbody = board.querySelector('tbody');
    poll('/console/api/board?q=' + encodeURIComponent(q), 1000, function (d) {
      var known = {};
      tbody.querySelectorAll('tr[data-sku]').forEach(function (tr) { known[tr.getAttribute('data-sku')] = tr; });
      var rows = d.rows || [];
      // Keep the lines in the server's order (the most recently loaded
      // first), reusing the ones shown so that changed cells flash.
      var frag = document.createDocumentFragment();
      rows.forEach(function (row) {
        var tr = known[row.sku] || boardRow(row);
        set(tr, row);
        frag.appendChild(tr);
      });
      if (rows.length > 0) {
        while (tbody.firstChild) tbody.removeChild(tbody.firstChild);
        tbody.appendChild(frag);
      }
      trends(d);
    }, live);
  }

  // trends redraws the sparklines the server drew: the polyline's points
  // are numbers the server computed, set as an attribute.
  function trends(d) {
    var at = document.querySelector('[data-t="at"]');
    if (at && d.at) at.textContent = String(d.at).replace('T', ' ').slice(0, 19);
    var t = d.trends;
    if (!t) return;
    document.querySelectorAll('[data-t="span"]').forEach(function (s) { s.textContent = t.span; });
    ['accepted', 'invoiced'].forEach(function (k) {
      var s = t[k];
      if (!s) return;
      var line = document.querySelector('svg.spark.' + k + ' polyline');
      if (line) line.setAttribute('points', s.points);
      var last = document.querySelector('[data-t="' + k + '.last"]');
      if (last) last.textContent = Number(s.last).toFixed(1);
      var peak = document.querySelector('[data-t="' + k + '.peak"]');
      if (peak) peak.textContent = Number(s.peak).toFixed(1);
    });
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
