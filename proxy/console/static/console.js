// The fleet page, live: every 2 s the rows are fetched again and written as text (never as markup).
"use strict";

const POLL_MS = 2000;

function row(cells) {
  const tr = document.createElement("tr");
  cells.forEach((cell, i) => {
    const td = document.createElement("td");
    if (i === 0) {
      const a = document.createElement("a");
      a.href = "/ui/servers/" + encodeURIComponent(cell);
      a.textContent = cell;
      td.appendChild(a);
    } else {
      td.textContent = cell;
    }
    tr.appendChild(td);
  });
  return tr;
}

async function refresh(body, stamp) {
  try {
    const response = await fetch("/ui/fleet.json", {credentials: "same-origin", cache: "no-store"});
    if (!response.ok) {
      stamp.textContent = "update failed: HTTP " + response.status;
      return;
    }
    const fleet = await response.json();
    body.replaceChildren(...fleet.rows.map(row));
    stamp.textContent = fleet.updated;
  } catch (error) {
    stamp.textContent = "update failed: " + error;
  }
}

document.addEventListener("DOMContentLoaded", () => {
  const body = document.getElementById("fleet");
  const stamp = document.getElementById("updated");
  if (body && stamp) {
    setInterval(() => refresh(body, stamp), POLL_MS);
  }
});
