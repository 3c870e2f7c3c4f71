"""A report opened in Chromium as its reader would open it, offline: every request that leaves the file is refused and
noted, and every console error and page error is noted, so a test can assert there were none; and its full-page
screenshot, kept as an artefact and checked not to be blank."""

from __future__ import annotations

import io
from dataclasses import dataclass, field
from pathlib import Path

from PIL import Image
from playwright.sync_api import Page, Route


@dataclass
class OfflinePage:
    """What the page did while it was open: its errors, and the addresses it tried to fetch outside its file."""

    errors: list[str] = field(default_factory=list)
    outside: list[str] = field(default_factory=list)


def open_offline(page: Page, path: Path) -> OfflinePage:
    """Open the HTML file ``path`` in ``page`` (1280x900, long timeouts: plotly inlined, on a loaded 2-core machine),
    with nothing fetched from outside the file."""
    seen = OfflinePage()
    page.on("console", lambda message: seen.errors.append(message.text) if message.type == "error" else None)
    page.on("pageerror", lambda error: seen.errors.append(str(error)))

    def offline(route: Route) -> None:
        if route.request.url.startswith("file://"):
            route.continue_()
        else:  # the page must work offline: nothing may be fetched
            seen.outside.append(route.request.url)
            route.abort()

    page.route("**/*", offline)
    page.set_viewport_size({"width": 1280, "height": 900})
    page.set_default_timeout(120_000)
    page.goto(path.as_uri())
    return seen


def screenshot(page: Page, path: Path) -> Image.Image:
    """The page's full-page screenshot, written to ``path`` (an artefact) and asserted not blank (more than 50
    colours)."""
    shot = page.screenshot(full_page=True)
    path.write_bytes(shot)
    print(f"screenshot: {path}")
    image = Image.open(io.BytesIO(shot)).convert("RGB")
    colours = image.getcolors(maxcolors=1 << 20)
    assert colours is not None and len(colours) > 50, "the page looks blank"
    return image
