// ebb console: the live part of a page. A section with data-events follows that stream of server-sent events
// (/ui/events, the browser's own EventSource, which reconnects by itself): each event is an HTML row, put first
// in #feed when the page has one, and every element marked data-refresh is asked to load itself again (htmx).
"use strict";
document.addEventListener("DOMContentLoaded", () => {
  const live = document.querySelector("[data-events]");
  if (!live) return;
  const status = live.querySelector(".status");
  const say = (state) => {
    live.dataset.state = state;
    if (status) status.textContent = state;
  };
  const source = new EventSource(live.dataset.events);
  source.onopen = () => say("live");
  source.onerror = () => say("reconnecting");
  source.addEventListener("disruption", (event) => {
    const feed = document.getElementById("feed");
    if (feed) {
      feed.insertAdjacentHTML("afterbegin", event.data);
      while (feed.children.length > 100) feed.lastElementChild.remove();
    }
    document.querySelectorAll("[data-refresh]").forEach((element) => htmx.trigger(element, "refresh"));
  });
});
