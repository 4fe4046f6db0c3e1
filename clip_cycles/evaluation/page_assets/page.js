// clip_cycles results page: sortable tables, no network, no libraries.
// Every <table class="sortable"> gets a button in each column header; a click sorts the
// body rows by that column (numbers by data-value, text otherwise; empty cells last) and
// a second click reverses the order. aria-sort tells assistive technology the state. The buttons
// sit in the header's last row (a row of column groups may stand above it).
"use strict";
(function () {
  function cellValue(row, column, numeric) {
    var cell = row.cells[column];
    if (!cell) { return null; }
    var raw = cell.hasAttribute("data-value") ? cell.getAttribute("data-value") : cell.textContent.trim();
    if (raw === "") { return null; }
    if (numeric) {
      var number = parseFloat(raw);
      return isNaN(number) ? null : number;
    }
    return raw.toLowerCase();
  }

  function headerRow(table) {
    return table.tHead.rows[table.tHead.rows.length - 1];
  }

  function sortTable(table, column, header) {
    var numeric = header.getAttribute("data-type") === "number";
    var ascending = header.getAttribute("aria-sort") !== "ascending";
    var body = table.tBodies[0];
    var rows = Array.prototype.slice.call(body.rows);
    rows.forEach(function (row, position) { row.setAttribute("data-position", String(position)); });
    rows.sort(function (a, b) {
      var x = cellValue(a, column, numeric), y = cellValue(b, column, numeric);
      if (x === null && y === null) { return a.getAttribute("data-position") - b.getAttribute("data-position"); }
      if (x === null) { return 1; }
      if (y === null) { return -1; }
      var order = x < y ? -1 : (x > y ? 1 : 0);
      if (order === 0) { return a.getAttribute("data-position") - b.getAttribute("data-position"); }
      return ascending ? order : -order;
    });
    rows.forEach(function (row) { body.appendChild(row); });
    Array.prototype.forEach.call(headerRow(table).cells, function (th) { th.removeAttribute("aria-sort"); });
    header.setAttribute("aria-sort", ascending ? "ascending" : "descending");
  }

  function makeSortable(table) {
    if (!table.tHead || !table.tBodies.length) { return; }
    Array.prototype.forEach.call(headerRow(table).cells, function (header, column) {
      var button = header.querySelector("button.sort");
      if (!button) { return; }
      button.addEventListener("click", function () { sortTable(table, column, header); });
    });
  }

  // The comparison picker: two models -> the static page of that pair (compare/<a>--<b>.html, in leaderboard order).
  function comparePicker(form) {
    form.addEventListener("submit", function (event) {
      event.preventDefault();
      var a = form.querySelector("#compare-a").selectedOptions[0];
      var b = form.querySelector("#compare-b").selectedOptions[0];
      if (!a || !b || a.value === b.value) { return; }
      if (+a.getAttribute("data-order") > +b.getAttribute("data-order")) { var t = a; a = b; b = t; }
      window.location.href = form.getAttribute("data-base") + a.value + "--" + b.value + ".html";
    });
  }

  Array.prototype.forEach.call(document.querySelectorAll("table.sortable"), makeSortable);
  var picker = document.getElementById("compare-form");
  if (picker) { comparePicker(picker); }
  document.documentElement.setAttribute("data-page-ready", "true");
})();
